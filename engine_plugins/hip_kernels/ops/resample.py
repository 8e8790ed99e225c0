"""Resample (pooling) forward / backward on the GPU: one thread per output (forward) or per input
gradient element (backward), any strides (NCHW, NHWC, ...), 2-D and 3-D windows.  Same semantics
and operation order as the CPU reference (kernels/resample.py): taps in window order, float32
sums, strict '>' for the maximum (first maximum wins), float32 lowest as the start value."""
from __future__ import annotations

import itertools
import math
import re

from hipdnn_cabi.schemas.catalog import FB_NAMES

from .. import codegen as cg
from ._base import check_storage_types, check_tensors, declines, kinds

KINDS = kinds("resample")
_E = {e: FB_NAMES[e] for e in ("ResampleMode", "PaddingMode")}
FLOATS = ("FLOAT", "HALF", "BFLOAT16")
INDEX_TYPES = ("INT32", "INT64")


def check(node, graph, r):
    check_tensors(node, r)
    check_storage_types(node, r, INDEX_TYPES + ("DOUBLE",))
    with declines(node.kind):
        _check(node, graph, r)


def emit(ctx, node, r, tag, fused=None):
    with declines(node.kind):
        _emit(ctx.prog, ctx.graph, node, r, ctx.loc, tag, ctx.sms, ctx.use_mma)


def _d(t):
    return [int(v) for v in t.dims]


def _s(t):
    return [int(v) for v in t.strides]


def params(node, nsp):
    a = node.attrs
    mode = _E["ResampleMode"].get(a.get("resample_mode"))
    if mode not in ("MAXPOOL", "AVGPOOL_EXCLUDE_PADDING", "AVGPOOL_INCLUDE_PADDING"):
        raise ValueError(f"resample mode {mode}")
    pm = _E["PaddingMode"].get(a.get("padding_mode") or 0, "PADDING_NOT_SET")

    def vec(k, default=None):
        v = a.get(k)
        if v is None:
            if default is None:
                raise ValueError(f"{k} not set")
            return [default] * nsp
        v = [int(e) for e in v]
        if len(v) != nsp:
            raise ValueError(f"{k} length")
        return v
    p = dict(mode=mode, pm=pm, win=vec("window"), st=vec("stride", 1), pre=vec("pre_padding", 0),
             post=vec("post_padding", 0))
    if min(p["win"] + p["st"]) < 1 or min(p["pre"] + p["post"]) < 0:
        raise ValueError("resample window/stride/padding")
    return p


def _check(node, graph, r):
    fwd = node.kind == "ResampleFwdAttributes"
    big, small = (r.get("x"), r.get("y")) if fwd else (r.get("dx"), r.get("dy"))
    if big is None or small is None:
        raise ValueError("resample operands missing")
    bd, sd = _d(big), _d(small)
    if not (4 <= len(bd) <= 5 and len(sd) == len(bd) and bd[:2] == sd[:2]):
        raise ValueError("resample ranks")
    p = params(node, len(bd) - 2)
    for k in range(len(bd) - 2):
        span = bd[2 + k] + p["pre"][k] + p["post"][k] - p["win"][k]
        if span < 0 or span // p["st"][k] + 1 != sd[2 + k]:
            raise ValueError("resample output shape")
    for t in (big, small):
        if cg.dtype_name(t.dtype) not in FLOATS + ("DOUBLE",):
            raise ValueError("resample data type")
    idx = r.get("index")
    if idx is not None:
        if p["mode"] != "MAXPOOL" or _d(idx) != sd or cg.dtype_name(idx.dtype) not in INDEX_TYPES:
            raise ValueError("resample index tensor")
    elif not fwd and p["mode"] == "MAXPOOL":
        raise ValueError("max-pool backward needs the index tensor")
    return p


def _emit(prog, graph, node, r, loc, tag, sms, use_mma=True):
    p = _check(node, graph, r)
    n0 = len(prog.steps)
    if node.kind == "ResampleFwdAttributes":
        _fwd(prog, r, loc, tag, p)
    else:
        _bwd(prog, r, loc, tag, p)
    data = cg.dtype_name((r["x"] if "x" in r else r["dy"]).dtype)
    if "DOUBLE" in (cg.dtype_name(t.dtype) for t in r.values()):
        cd = cg.dtype_name(node.compute_dtype)
        wide = cd == "DOUBLE" or (cd == "UNSET" and data == "DOUBLE")
        prog.steps[n0:] = [st[:1] + (_widen(st[1], wide),) + st[2:] for st in prog.steps[n0:]]


_F_LIT = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)f\b")


def _widen(src, wide):
    """A pooling kernel with DOUBLE tensors: stores through hdn_from_double; ``wide`` (compute
    type DOUBLE, or UNSET with DOUBLE data, as the CPU reference): the arithmetic, the
    running maximum (starting at float32's lowest value, as the CPU) and the sums in double."""
    src = src.replace("hdn_from_float<", "hdn_from_double<")
    if not wide:
        return src
    src = re.sub(r"\bfloat\b", "double", src)
    src = src.replace("hdn_to_float(", "hdn_to_double(").replace("0.f", "0.0")
    return _F_LIT.sub(r"\1", src)


HEAD = '#define HDN_GENERATED 1\n#include "hdn_compat.h"\n'


def _fwd(prog, r, loc, tag, p):
    x, y, idx = r["x"], r["y"], r.get("index")
    xd, yd = _d(x), _d(y)
    n = len(xd)
    nsp = n - 2
    Tx, Ty = cg.CTYPE[cg.dtype_name(x.dtype)], cg.CTYPE[cg.dtype_name(y.dtype)]
    params_ = [f"const {Tx}* __restrict__ px", f"{Ty}* __restrict__ py"]
    args = [loc[x.uid], loc[y.uid]]
    if idx is not None:
        params_.append(f"{cg.CTYPE[cg.dtype_name(idx.dtype)]}* __restrict__ pidx")
        args.append(loc[idx.uid])
    total = math.prod(yd)
    order = cg.dense_order(yd, _s(y))
    name = f"hdn_pool_fwd_{tag}"
    L = [HEAD, f'extern "C" __global__ void __launch_bounds__(256) {name}({", ".join(params_)}) {{',
         "  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;",
         f"  if (i >= {total}LL) return;"]
    L += ["  " + s for s in cg.coord_code(yd, order, "i", "long long")]
    xs = _s(x)
    L.append(f"  const long long xb = (long long)c0 * {xs[0]} + (long long)c1 * {xs[1]};")
    mx = p["mode"] == "MAXPOOL"
    zero = p["pm"] == "ZERO_PAD"
    if mx:
        L += [f"  float best = {cg.flit(-cg.FLT_MAX)}; long long bi = -1;"]
    else:
        L += ["  float acc = 0.f; int cnt = 0;"]
    for tap in itertools.product(*[range(w) for w in p["win"]]):
        conds, pos = [], []
        for k in range(nsp):
            e = f"((long long)c{2 + k} * {p['st'][k]} + {tap[k] - p['pre'][k]})"
            pos.append(e)
            conds.append(f"{e} >= 0 && {e} < {xd[2 + k]}")
        inb = " && ".join(conds)
        off = " + ".join(f"{pos[k]} * {xs[2 + k]}LL" for k in range(nsp))
        flat = pos[0]
        for k in range(1, nsp):
            flat = f"({flat} * {xd[2 + k]} + {pos[k]})"
        if mx:
            L.append(f"  if ({inb}) {{ const float v = hdn_to_float(px[xb + {off}]); "
                     f"if (v > best) {{ best = v; bi = {flat}; }} }}")
            if zero:
                L.append(f"  else {{ if (0.f > best) {{ best = 0.f; bi = -1; }} }}")
        else:
            L.append(f"  if ({inb}) {{ acc += hdn_to_float(px[xb + {off}]); ++cnt; }}")
    ys = _s(y)
    yoff = " + ".join(f"(long long)c{k} * {ys[k]}" for k in range(n))
    if mx:
        L.append(f"  py[{yoff}] = hdn_from_float<{Ty}>(best);")
        if idx is not None:
            ist = _s(idx)
            ioff = " + ".join(f"(long long)c{k} * {ist[k]}" for k in range(n))
            L.append(f"  pidx[{ioff}] = ({cg.CTYPE[cg.dtype_name(idx.dtype)]})bi;")
    else:
        vol = 1
        for w in p["win"]:
            vol *= w
        div = f"{float(vol)!r}f" if p["mode"] == "AVGPOOL_INCLUDE_PADDING" else "(float)(cnt > 0 ? cnt : 1)"
        L.append(f"  py[{yoff}] = hdn_from_float<{Ty}>(acc / {div});")
    L.append("}")
    prog.steps.append(("launch", "\n".join(L) + "\n", name, (max(1, -(-total // 256)), 1, 1),
                       (256, 1, 1), args))


def _bwd(prog, r, loc, tag, p):
    dy, dx, idx = r["dy"], r["dx"], r.get("index")
    yd, xd = _d(dy), _d(dx)
    n = len(xd)
    nsp = n - 2
    Tdy, Tdx = cg.CTYPE[cg.dtype_name(dy.dtype)], cg.CTYPE[cg.dtype_name(dx.dtype)]
    params_ = [f"const {Tdy}* __restrict__ pdy", f"{Tdx}* __restrict__ pdx"]
    args = [loc[dy.uid], loc[dx.uid]]
    mx = p["mode"] == "MAXPOOL"
    if mx:
        params_.append(f"const {cg.CTYPE[cg.dtype_name(idx.dtype)]}* __restrict__ pidx")
        args.append(loc[idx.uid])
    total = math.prod(xd)
    order = cg.dense_order(xd, _s(dx))
    name = f"hdn_pool_bwd_{tag}"
    ys = _s(dy)
    L = [HEAD, f'extern "C" __global__ void __launch_bounds__(256) {name}({", ".join(params_)}) {{',
         "  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;",
         f"  if (i >= {total}LL) return;"]
    L += ["  " + s for s in cg.coord_code(xd, order, "i", "long long")]
    L.append(f"  const long long yb = (long long)c0 * {ys[0]} + (long long)c1 * {ys[1]};")
    flat = "c2"
    for k in range(1, nsp):
        flat = f"({flat} * {xd[2 + k]} + c{2 + k})"
    L.append(f"  const long long me = {flat};")
    L.append("  float acc = 0.f;")
    vol = 1
    for w in p["win"]:
        vol *= w
    for tap in itertools.product(*[range(w) for w in p["win"]]):
        conds, os_ = [], []
        for k in range(nsp):
            num = f"((long long)c{2 + k} + {p['pre'][k] - tap[k]})"
            o = f"({num} / {p['st'][k]})"
            conds.append(f"{num} >= 0 && {num} % {p['st'][k]} == 0 && {o} < {yd[2 + k]}")
            os_.append(o)
        cond = " && ".join(conds)
        off = " + ".join(f"{os_[k]} * {ys[2 + k]}LL" for k in range(nsp))
        if mx:
            ist = _s(idx)
            ioff = (f"(long long)c0 * {ist[0]} + (long long)c1 * {ist[1]} + " +
                    " + ".join(f"{os_[k]} * {ist[2 + k]}LL" for k in range(nsp)))
            L.append(f"  if ({cond}) {{ if ((long long)pidx[{ioff}] == me) "
                     f"acc += hdn_to_float(pdy[yb + {off}]); }}")
        else:
            if p["mode"] == "AVGPOOL_INCLUDE_PADDING":
                div = f"{float(vol)!r}f"
            else:
                parts = []
                for k in range(nsp):
                    lo = f"({os_[k]} * {p['st'][k]} - {p['pre'][k]})"
                    parts.append(f"hdn_cnt({lo}, {p['win'][k]}, {xd[2 + k]})")
                div = "(float)hdn_max1(" + " * ".join(parts) + ")"
            L.append(f"  if ({cond}) {{ acc += hdn_to_float(pdy[yb + {off}]) / {div}; }}")
    xs = _s(dx)
    xoff = " + ".join(f"(long long)c{k} * {xs[k]}" for k in range(n))
    L.append(f"  pdx[{xoff}] = hdn_from_float<{Tdx}>(acc);")
    L.append("}")
    helpers = ("__device__ __forceinline__ long long hdn_cnt(long long lo, long long w, long long n) "
               "{ long long a = lo < 0 ? 0 : lo; long long b = lo + w < n ? lo + w : n; "
               "return b > a ? b - a : 0; }\n"
               "__device__ __forceinline__ long long hdn_max1(long long v) { return v > 0 ? v : 1; }\n")
    src = L[0] + helpers + "\n".join(L[1:]) + "\n"
    prog.steps.append(("launch", src, name, (max(1, -(-total // 256)), 1, 1), (256, 1, 1), args))
