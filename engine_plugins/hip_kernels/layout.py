"""Layout transforms in the workspace for the tensor-core GEMM paths.

The wgmma core reads operands as 16-byte chunks along one packed axis (cp.async / the tensor
copy engine).  Convolutions in NCHW / KCRS have their reduction axis (C, or K for backward data)
strided, and fp32 operands on TF32 tensor cores must be K-major; such operands are first
copied into the workspace in the layout the core wants:

* convolution forward: x -> NHWC, w -> KRSC;
* convolution backward data: dy -> NHWC, w -> KRSC (16-bit) / CRSK (TF32, k innermost);
* convolution backward filter (16-bit): x, dy -> NHWC;
* matmul with TF32 or fp8 (K-major-only wgmma types): an M-major A / N-major B -> K-major;
  convolutions with those types as above (backward data: CRSK weights), backward filter
  stays on the SIMT core (its dy operand would be M-major).

* matmul on the wgmma core, any type: an operand with no 16-byte chunk path (rows not 16-byte
  aligned - N or K not a multiple of 8, odd strides) -> a zero-padded copy with 16-byte aligned
  rows (:func:`pad_matmul`, ``kernels/pack.hip``) when the cost model says so.

* the SIMT (FFMA) core, fp32 NCHW convolution forward: x -> NHWC, w -> KRSC when the cost model
  says so (:func:`prepare_simt`, knob ``HIPDNN_CABI_HIP_SIMT_NHWC``).

Outputs are never transformed: the epilogue stores with any strides.  Plans with a transform
report ``HIPDNN_BEHAVIOR_NOTE_REQUIRES_LAYOUT_TRANSFORM`` and count the copies in their workspace
size.  A copy of a packed tensor that moves one group of axes behind another is a tiled
transpose (``kernels/transpose.hip``); anything else is one elementwise copy kernel.
"""
from __future__ import annotations

import math

from . import codegen as cg
from . import gemm_core as gc
from .codegen import EwIn, EwOut


class View:
    """A tensor as the GEMM builders see it: ``dims``/``strides`` of the workspace copy; the
    key ``uid`` maps to the copy's workspace location."""

    def __init__(self, t, strides, tag):
        self.dims = list(t.dims)
        self.strides = [int(s) for s in strides]
        self.dtype = t.dtype
        self.uid = ("xform", t.uid, tag)
        self.value = None
        self.virtual = True
        self.source = t
        # rows padded to 16-byte multiples with zeros past the logical extent (:func:`emit_pad`):
        # 16-byte chunk loads may read the padding (a zero k tail, or m / n rows never stored)
        self.zero_pad = False


def packed_strides(dims, order):
    """Packed strides with ``order`` listing dims outermost first."""
    st = [0] * len(dims)
    acc = 1
    for d in reversed(order):
        st[d] = acc
        acc *= int(dims[d])
    return st


def _is_natural_packed(dims, strides):
    """Row-major packed (the strides of size-1 dims do not matter)."""
    want = packed_strides(dims, list(range(len(dims))))
    return all(int(d) == 1 or int(s) == e for d, s, e in zip(dims, strides, want))


def _transpose_split(dims, strides, order):
    """(B, R, C, sb, sr) when the copy is out[b][c][r] = in[b][r][c] of a packed input: ``order``
    = (0..p-1, q..n-1, p..q-1); else None."""
    n = len(dims)
    if not _is_natural_packed(dims, strides):
        return None
    for p in range(n):
        for q in range(p + 1, n):
            if list(order) == list(range(p)) + list(range(q, n)) + list(range(p, q)):
                B = math.prod(dims[:p])
                R = math.prod(dims[p:q])
                C = math.prod(dims[q:])
                return B, R, C, R * C, C
    return None


def emit_copy(prog, t, order, loc, tag):
    """Copy tensor ``t`` (at ``loc[t.uid]``) into a workspace buffer packed in ``order``
    (outermost first); returns the :class:`View`.  Records the transform on the program."""
    dims = [int(d) for d in t.dims]
    dt = cg.dtype_name(t.dtype)
    es = cg.ELEM_SIZE[dt]
    st = packed_strides(dims, order)
    v = View(t, st, tag)
    off = prog.ws_alloc(math.prod(dims) * es)
    loc[v.uid] = ("ws", off)
    sp = _transpose_split(dims, [int(s) for s in t.strides], order)
    if sp is not None and sp[0] <= 65535 and -(-sp[1] // 32) <= 65535:
        B, R, C, sb, sr = sp
        raw = {4: "unsigned", 2: "hdn_u16", 1: "unsigned char"}[es]
        src = "\n".join(["#define HDN_GENERATED 1", '#include "hdn_compat.h"', f"typedef {raw} TR_T;",
                         f"#define TR_B {B}", f"#define TR_R {R}", f"#define TR_C {C}",
                         f"#define TR_SR {sr}", f"#define TR_SB {sb}", cg.read_kernel("transpose.hip")])
        prog.steps.append(("launch", src, "hdn_transpose", (-(-C // 32), -(-R // 32), B), (32, 8, 1),
                           [loc[t.uid], ("ws", off)]))
    else:
        name = f"hdn_relayout_{tag}"
        src, grid, block = cg.elementwise_source(
            name, dims, list(order), [EwIn("xv", dt, [int(s) for s in t.strides], param="px")], [],
            [EwOut("xv", dt, st, "py")])
        prog.steps.append(("launch", src, name, grid, block, [loc[t.uid], ("ws", off)]))
    prog.layout_transforms = getattr(prog, "layout_transforms", 0) + 1
    prog.notes.append(f"layout transform: tensor {t.uid} -> workspace, dim order {tuple(order)}")
    return v


def pad_quantum(dtype):
    """Elements per padded row quantum: 16 bytes, at least the 8 elements the GEMM builders'
    chunk checks ask for (16-bit: 8, fp32: 8 = 32 bytes, fp8: 16)."""
    return max(8, 16 // cg.ELEM_SIZE[cg.dtype_name(dtype)])


def chunk_axis(t, kd, md, kmajor_only, packed=False):
    """How the GEMM builders read matrix operand ``t`` (k axis ``kd``, m / n axis ``md``, the
    dims before them batch dims) in 16-byte chunks: "k" (K-major, mode 1), "mn" (M/N-major,
    mode 2) or None (element gathers) - the checks of ops/matmul._spec_matmul with the row
    quantum of :func:`pad_quantum`.  ``packed``: for a packed K-major copy of ``t`` instead."""
    dims, st = [int(d) for d in t.dims], [int(x) for x in t.strides]
    q = pad_quantum(t.dtype)
    if packed:
        return "k" if dims[kd] % q == 0 else None
    if getattr(t, "zero_pad", False):
        return "k" if st[kd] == 1 else ("mn" if st[md] == 1 and not kmajor_only else None)
    rest = [s for d, s in zip(dims[:-2], st[:-2]) if d != 1]
    if st[kd] == 1 and dims[kd] % q == 0 and all(s % q == 0 for s in [st[md]] + rest):
        return "k"
    if not kmajor_only and st[md] == 1 and dims[md] % q == 0 and all(s % q == 0 for s in [st[kd]] + rest):
        return "mn"
    return None


def emit_pad(prog, t, inner, loc, tag):
    """Copy tensor ``t`` (at ``loc[t.uid]``) into a workspace buffer with dim ``inner`` innermost,
    its extent padded with zeros to a multiple of :func:`pad_quantum` (16-byte aligned rows), the
    other dims packed outside in their order (``kernels/pack.hip``); returns the :class:`View`
    (``zero_pad`` set).  Records the transform on the program."""
    dims = [int(d) for d in t.dims]
    dt = cg.dtype_name(t.dtype)
    es = cg.ELEM_SIZE[dt]
    q = pad_quantum(t.dtype)
    P = -(-dims[inner] // q) * q
    order = [d for d in range(len(dims)) if d != inner] + [inner]
    st = packed_strides([P if d == inner else x for d, x in enumerate(dims)], order)
    v = View(t, st, tag)
    v.zero_pad = True
    R = math.prod(dims) // dims[inner]
    off = prog.ws_alloc(R * P * es)
    loc[v.uid] = ("ws", off)
    src_st = [int(x) for x in t.strides]
    lines = ["long long o = 0;"]
    for d in reversed(order[:-1]):
        if dims[d] != 1:
            lines.append(f"o += (r % {dims[d]}) * {src_st[d]}LL; r /= {dims[d]};")
    raw = {4: "unsigned", 2: "hdn_u16", 1: "unsigned char"}[es]
    src = "\n".join(["#define HDN_GENERATED 1", '#include "hdn_compat.h"', f"typedef {raw} PK_T;",
                     f"#define PK_V {16 // es}", f"#define PK_R {R}", f"#define PK_C {dims[inner]}",
                     f"#define PK_CP {P}", f"#define PK_SC {src_st[inner]}LL",
                     "__device__ __forceinline__ long long pk_row(long long r) { " + " ".join(lines) +
                     " return o; }", cg.read_kernel("pack.hip")])
    chunks = R * (P // (16 // es))
    prog.steps.append(("launch", src, "hdn_pack", (max(1, -(-chunks // 256)), 1, 1), (256, 1, 1),
                       [loc[t.uid], ("ws", off)]))
    prog.layout_transforms = getattr(prog, "layout_transforms", 0) + 1
    prog.notes.append(f"pad pre-pass: tensor {t.uid} -> workspace, dim {inner} innermost padded "
                      f"{dims[inner]} -> {P}")
    return v


def _matmul_mnk(r):
    a, b, c = r["a"], r["b"], r["c"]
    return (int(a.dims[-2]), int(b.dims[-1]), int(a.dims[-1]),
            math.prod(int(d) for d in c.dims[:-2]))


def pad_matmul(prog, r, loc, tag, kmajor_only, sms, mnk):
    """Matmul operands the wgmma producer could only gather element by element (rows not
    16-byte aligned: odd N or K, odd strides; K-major-only types with an unaligned k) -> padded
    workspace copies (:func:`emit_pad`) when the cost model says so
    (:func:`gemm_core.pad_choice`): the unit-stride axis stays innermost (K for the K-major-only
    types, and for operands with no unit-stride axis).  Returns the roles."""
    M, N, K, batch = mnk
    es = cg.ELEM_SIZE[cg.dtype_name(r["a"].dtype)]
    axes = {}
    for role in ("a", "b"):
        t = r[role]
        nd = len(t.dims)
        kd, md = (nd - 1, nd - 2) if role == "a" else (nd - 2, nd - 1)
        axes[role] = (kd, md, chunk_axis(t, kd, md, kmajor_only))
    r = dict(r)
    for i, role in enumerate(("a", "b")):
        kd, md, how = axes[role]
        if how is not None:
            continue
        t = r[role]
        unit_mn = int(t.dims[md]) > 1 and int(t.strides[md]) == 1 and not kmajor_only
        inner = md if unit_mn else kd
        other = axes["b" if role == "a" else "a"][2]
        gather = [gc.GATHER_ELEM, gc.GATHER_ELEM]
        gather[1 - i] = 0.0 if other is not None else gc.GATHER_ELEM
        padded = list(gather)
        padded[i] = 0.0
        nbytes = math.prod(int(d) for d in t.dims) * es
        if not gc.pad_choice(M, N, K, batch, sms, es, tuple(gather), tuple(padded), nbytes):
            continue
        r[role] = emit_pad(prog, t, inner, loc, f"{tag}_p{role}")
        axes[role] = (kd, md, "k" if inner == kd else "mn")
    return r


def _nhwc_order(nd):
    return [0] + list(range(2, nd)) + [1]


def _needs(t, order):
    """True unless ``t`` already has the strides of the packed ``order`` (size-1 dims free)."""
    want = packed_strides(list(t.dims), order)
    return any(int(d) != 1 and int(s) != w for d, s, w in zip(t.dims, t.strides, want))


def prepare(prog, node, r, loc, tag, core, tf32, sms=0):
    """The operand roles ``r`` with the transformed operands replaced by views (copies emitted
    into ``prog``), for a GEMM about to run on ``core``.  Only the wgmma core is fed this way
    (the other cores gather any layout).  ``sms``: the pad pre-pass's cost model
    (:func:`pad_matmul`)."""
    mnk = _matmul_mnk(r) if node.kind == "MatmulAttributes" else None
    if core != "wgmma":
        return r
    r = dict(r)
    kind = node.kind

    def xf(role, order, k):
        t = r[role]
        if _needs(t, order):
            r[role] = emit_copy(prog, t, order, loc, f"{tag}_{k}")
        elif [int(x) for x in t.strides] != packed_strides(list(t.dims), order):
            # already in that layout up to the strides of size-1 dims: the same memory seen
            # with canonical strides (so the 16-byte-chunk and tensor-map checks hold)
            v = View(t, packed_strides(list(t.dims), order), f"{tag}_{k}")
            loc[v.uid] = loc[t.uid]
            r[role] = v
    if kind == "MatmulAttributes":
        a, b = r["a"], r["b"]
        if tf32:           # K-major-only wgmma types: M-major A / N-major B -> K-major copies
            if int(a.dims[-1]) > 1 and int(a.strides[-1]) != 1 and \
                    chunk_axis(a, len(a.dims) - 1, len(a.dims) - 2, True, packed=True) is not None:
                xf("a", list(range(len(a.dims))), "a")          # [.., M, K]
            nb = len(b.dims)
            if int(b.dims[-2]) > 1 and int(b.strides[-2]) != 1 and \
                    chunk_axis(b, nb - 2, nb - 1, True, packed=True) is not None:
                xf("b", list(range(nb - 2)) + [nb - 1, nb - 2], "b")   # [.., N, K]
        r = pad_matmul(prog, r, loc, tag, tf32, sms, mnk)
        if tf32:           # not padded (the cost model): the unpadded K-major copy, as before
            a, b = r["a"], r["b"]
            if int(a.dims[-1]) > 1 and int(a.strides[-1]) != 1:
                xf("a", list(range(len(a.dims))), "a")
            nb = len(b.dims)
            if int(b.dims[-2]) > 1 and int(b.strides[-2]) != 1:
                xf("b", list(range(nb - 2)) + [nb - 1, nb - 2], "b")
        return r
    nd = len(r[("x", "dx")[kind == "ConvolutionBwdAttributes"]].dims)
    nhwc = _nhwc_order(nd)
    if kind == "ConvolutionFwdAttributes":
        xf("x", nhwc, "x")
        xf("w", nhwc, "w")                     # KRSC
    elif kind == "ConvolutionBwdAttributes":
        xf("dy", nhwc, "dy")
        if tf32:
            xf("w", [1] + list(range(2, nd)) + [0], "w")   # CRSK: k innermost (K-major B)
        else:
            xf("w", nhwc, "w")                 # KRSC: c innermost (N-major B)
    elif kind == "ConvolutionWrwAttributes":
        if tf32:
            return r                           # dy would be M-major: stays on FFMA
        xf("x", nhwc, "x")
        xf("dy", nhwc, "dy")
    return r


def prepare_simt(prog, node, r, loc, tag, core, sms):
    """fp32 NCHW convolution forward on the SIMT (FFMA) core: copy x -> NHWC and w -> KRSC
    into the workspace when :func:`gemm_core.simt_nhwc_choice` says the channels-last kernel
    (16-byte k-vector loads of both operands) plus the copies beats the NCHW gather; y keeps
    its layout (the epilogue stores any strides).  Other ops / cores / layouts: ``r`` as is.
    Not used where the NCHW operand already loads as 16-byte m-vectors (``mvec``: 1 x 1, unit
    stride, no padding: ops/conv._nchw_mvec)."""
    if core != "simt" or node.kind != "ConvolutionFwdAttributes":
        return r
    x, w = r["x"], r["w"]
    if cg.dtype_name(x.dtype) != "FLOAT" or cg.dtype_name(w.dtype) != "FLOAT":
        return r
    nd = len(x.dims)
    if nd < 3 or nd > 5 or int(x.dims[1]) <= 1 or int(x.strides[1]) == 1:
        return r                                   # channels-last already (or one channel)
    nhwc = _nhwc_order(nd)
    xd, wd, yd = [int(d) for d in x.dims], [int(d) for d in w.dims], [int(d) for d in r["y"].dims]
    M, N, K = yd[0] * math.prod(yd[2:]), wd[0], xd[1] * math.prod(wd[2:])
    copies = [t for t in (x, w) if _needs(t, nhwc)]
    nbytes = sum(math.prod(int(d) for d in t.dims) * 4 for t in copies)
    if not gc.simt_nhwc_choice(M, N, K, sms, nbytes, len(copies)):
        return r
    gain, cost = gc.simt_nhwc_estimate(M, N, K, sms, nbytes, len(copies))
    r = dict(r)
    for role, t in (("x", x), ("w", w)):
        if _needs(t, nhwc):
            r[role] = emit_copy(prog, t, nhwc, loc, f"{tag}_s{role}")
        elif [int(v) for v in t.strides] != packed_strides(list(t.dims), nhwc):
            v = View(t, packed_strides(list(t.dims), nhwc), f"{tag}_s{role}")
            loc[v.uid] = loc[t.uid]
            r[role] = v
    prog.notes.append(f"{node.kind}: SIMT core on NHWC copies (modelled gain {gain:.0f} us, "
                      f"copies {cost:.0f} us)")
    return r
