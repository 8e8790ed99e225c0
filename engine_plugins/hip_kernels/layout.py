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
* 16-bit convolutions on the wgmma core whose channel counts are not multiples of 8: x / dy /
  w -> channel-innermost copies zero-padded to a multiple of 8 channels, backward filter into
  a padded dw copied back (:func:`pad_conv`) when the cost model says so.

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


def emit_copy(prog, t, order, loc, tag, counted=True):
    """Copy tensor ``t`` (at ``loc[t.uid]``) into a workspace buffer packed in ``order``
    (outermost first); returns the :class:`View`.  Records the transform on the program
    (``counted``: as an operand layout transform - REQUIRES_LAYOUT_TRANSFORM; an algorithm's
    own small copy, such as the transposed filter of backward data on the forward path, is
    not)."""
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
    if counted:
        prog.layout_transforms = getattr(prog, "layout_transforms", 0) + 1
        prog.notes.append(f"layout transform: tensor {t.uid} -> workspace, dim order {tuple(order)}")
    else:
        prog.notes.append(f"workspace copy: tensor {t.uid}, dim order {tuple(order)}")
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


def pad_channels(prog, t, dim, loc, tag):
    """:func:`emit_pad` with dim ``dim`` (a channel dim) innermost, the view's extent of it the
    padded one: a convolution over the extra channels, which hold zeros, adds nothing.
    ``chan_pad`` on the view: the logical extent."""
    v = emit_pad(prog, t, dim, loc, tag)
    q = pad_quantum(t.dtype)
    v.dims[dim] = -(-int(t.dims[dim]) // q) * q
    v.chan_pad = int(t.dims[dim])
    return v


def pad_output(prog, t, dims_p, order, loc, tag):
    """A workspace buffer of the padded extents ``dims_p`` (packed in ``order``, outermost
    first) that a GEMM writes in place of output ``t``; :func:`emit_unpad` copies its leading
    ``t.dims`` block into ``t`` afterwards."""
    es = cg.ELEM_SIZE[cg.dtype_name(t.dtype)]
    v = View(t, packed_strides(dims_p, order), tag)
    v.dims = [int(d) for d in dims_p]
    v.uid = tag             # the epilogue names its output parameter after the uid: an identifier
    loc[v.uid] = ("ws", prog.ws_alloc(math.prod(v.dims) * es))
    v.unpad = t
    return v


def emit_unpad(prog, v, loc, tag):
    """Copy the leading ``v.unpad.dims`` block of the padded output view ``v``
    (:func:`pad_output`) into the output tensor itself (one elementwise kernel)."""
    t = v.unpad
    dims = [int(d) for d in t.dims]
    dt = cg.dtype_name(t.dtype)
    out_st = [int(x) for x in t.strides]
    order = cg.dense_order(dims, out_st) if cg.is_dense(dims, out_st) else list(range(len(dims)))
    name = f"hdn_unpad_{tag}"
    src, grid, block = cg.elementwise_source(
        name, dims, list(order), [EwIn("xv", dt, list(v.strides), param="px")], [],
        [EwOut("xv", dt, out_st, "py")])
    prog.steps.append(("launch", src, name, grid, block, [loc[v.uid], loc[t.uid]]))
    prog.layout_transforms = getattr(prog, "layout_transforms", 0) + 1
    prog.notes.append(f"pad pre-pass: tensor {t.uid} written padded {tuple(v.dims)} in the "
                      f"workspace, copied back")


def _bytes(t, dims=None):
    return math.prod(int(d) for d in (dims or t.dims)) * cg.ELEM_SIZE[cg.dtype_name(t.dtype)]


def pad_conv(prog, node, r, loc, tag, sms):
    """Ungrouped 16-bit convolutions whose channel counts are not multiples of 8 (C = 3
    first layers, odd channel counts): the operands whose channel rows the wgmma producer
    could only gather element by element are copied into workspace buffers with the channels
    innermost and zero-padded to a multiple of 8 (:func:`pad_channels`, ``kernels/pack.hip``)
    when :func:`gemm_core.pad_choice` says the GEMM on them plus the copies is faster; the
    convolution then runs over the padded channel counts (the zero channels add nothing) on
    the 16-byte chunk / tensor-map paths.

    * forward, C % 8: x -> NHWC, w -> KRSC, both C padded (y as is: the epilogue stores any
      K);
    * backward data, K % 8 or C % 8: dy -> NHWC with K padded (when K % 8), w -> CRSK with K
      padded (k innermost: a K-major B whatever C is; dx as is);
    * backward filter, K % 8 or C % 8: dy -> NHWC (K padded), x -> NHWC (C padded), the GEMM
      writes a padded KRSC dw in the workspace, copied back into dw (:func:`emit_unpad`).

    Returns (roles, the roles replaced)."""
    kind = node.kind
    rx, rw, ry = {"ConvolutionFwdAttributes": ("x", "w", "y"),
                  "ConvolutionBwdAttributes": ("dx", "w", "dy"),
                  "ConvolutionWrwAttributes": ("x", "dw", "dy")}[kind]
    if any(q not in r for q in (rx, rw, ry)):
        return r, set()
    x, w, y = r[rx], r[rw], r[ry]
    # the inputs one 16-bit type (the wgmma core's operands), the output 16-bit or FLOAT
    ins = {"ConvolutionFwdAttributes": (x, w), "ConvolutionBwdAttributes": (y, w),
           "ConvolutionWrwAttributes": (x, y)}[kind]
    if {cg.dtype_name(t.dtype) for t in ins} not in ({"HALF"}, {"BFLOAT16"}) or \
            not {cg.dtype_name(t.dtype) for t in (x, w, y)} <= {"HALF", "BFLOAT16", "FLOAT"}:
        return r, set()
    xd, wd, yd = [int(d) for d in x.dims], [int(d) for d in w.dims], [int(d) for d in y.dims]
    nd = len(xd)
    if nd < 3 or xd[1] != wd[1] or wd[0] != yd[1]:
        return r, set()                        # grouped: one GEMM per group, left as is
    N_, C, K = xd[0], xd[1], wd[0]
    q = pad_quantum(x.dtype)
    Cp, Kp = -(-C // q) * q, -(-K // q) * q
    taps = math.prod(wd[2:])
    es = cg.ELEM_SIZE[cg.dtype_name(x.dtype)]
    nhwc = _nhwc_order(nd)
    ge, gch = gc.GATHER_ELEM, gc.GATHER_CHUNK

    def extra(*ops):
        """(bytes, launches) of the pad copies of ``ops`` ((tensor, padded dims)) beyond the
        layout copies (:func:`prepare`) the operands get anyway."""
        more = [_bytes(t, d) for t, d in ops if not _needs(t, nhwc)]
        return sum(more), len(more)

    def with_dy():
        """``r`` with dy replaced by its padded copy where K is not a multiple of ``q``, and the
        roles so replaced (w included: the callers pad it next)."""
        out = dict(r)
        if K % q:
            out[ry] = pad_channels(prog, y, 1, loc, f"{tag}_pdy")
            return out, {rw, ry}
        return out, {rw}
    if kind == "ConvolutionFwdAttributes":
        if C % q == 0:
            return r, set()
        M = N_ * math.prod(yd[2:])
        nbytes, copies = extra((x, [N_, Cp] + xd[2:]), (w, [K, Cp] + wd[2:]))
        if not gc.pad_choice(M, K, C * taps, 1, sms, es, (ge, ge), (gch, 0.0), nbytes,
                             (M, K, Cp * taps), copies):
            return r, set()
        r = dict(r)
        r[rx] = pad_channels(prog, x, 1, loc, f"{tag}_px")
        r[rw] = pad_channels(prog, w, 1, loc, f"{tag}_pw")
        return r, {rx, rw}
    if C % q == 0 and K % q == 0:
        return r, set()
    if kind == "ConvolutionBwdAttributes":
        M = N_ * math.prod(xd[2:])
        nbytes, copies = extra(*([(y, [N_, Kp] + yd[2:])] if K % q else []) + [(w, [Kp, C] + wd[2:])])
        if not gc.pad_choice(M, C, K * taps, 1, sms, es, (ge if K % q else gch, ge if C % q else gch),
                             (gch, gch), nbytes, (M, C, Kp * taps), copies):
            return r, set()
        r, done = with_dy()
        r[rw] = pad_channels(prog, w, 0, loc, f"{tag}_pw")
        return r, done
    red = N_ * math.prod(yd[2:])
    nbytes, copies = extra(*([(y, [N_, Kp] + yd[2:])] if K % q else []) +
                           ([(x, [N_, Cp] + xd[2:])] if C % q else []))
    # + the padded dw written and copied back
    if not gc.pad_choice(K, C * taps, red, 1, sms, es, (ge if K % q else gch, ge if C % q else gch),
                         (gch, gch), nbytes + 2 * _bytes(w, [Kp, Cp] + wd[2:]), (Kp, Cp * taps, red),
                         copies + 1):
        return r, set()
    r, done = with_dy()
    if C % q:
        r[rx] = pad_channels(prog, x, 1, loc, f"{tag}_px")
        done.add(rx)
    r[rw] = pad_output(prog, w, [Kp, Cp] + wd[2:], nhwc, loc, f"{tag}_pdw")
    return r, done


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
    (:func:`pad_matmul`, :func:`pad_conv`)."""
    mnk = _matmul_mnk(r) if node.kind == "MatmulAttributes" else None
    if core != "wgmma":
        return r
    r = dict(r)
    kind = node.kind

    padded = set()          # roles already on padded channel-innermost copies (pad_conv)

    def xf(role, order, k):
        if role in padded:
            return
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
    if not tf32:
        r, padded = pad_conv(prog, node, r, loc, tag, sms)
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
