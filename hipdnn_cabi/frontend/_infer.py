"""Output-shape inference (the cases hipDNN / cudnn-frontend infer) and graph validation helpers."""
from __future__ import annotations

import numpy as np

from ..errors import BadParamError
from .tensor import packed_strides, stride_order


def _known(*ts):
    return all(t is not None and t.dim is not None for t in ts)


def like_strides(dims, ref):
    """Packed strides for ``dims`` in ``ref``'s stride order (same rank), else row-major."""
    if ref is not None and ref.stride is not None and len(ref.stride) == len(dims):
        return packed_strides(dims, stride_order(ref.stride))
    return packed_strides(dims)


def fill(t, dims, ref=None, node=None, role=None):
    """Set t's dims (if unset) and strides (if unset); dims the user set must be the inferred ones."""
    if t is None:
        return
    if t.dim is not None and dims is not None and node is not None and \
            [int(d) for d in t.dim] != [int(d) for d in dims]:
        raise BadParamError(f"{node.kind} {node.name!r}: output {role} ({_tn(t)}) has dims "
                            f"{list(t.dim)}, but its inputs give {list(dims)}")
    if t.dim is None and dims is not None:
        t.dim = [int(d) for d in dims]
    if t.stride is None and t.dim is not None:
        t.stride = like_strides(t.dim, ref)


def conv_params(node, nsp):
    a = node.attrs

    def vec(key, default):
        v = a.get(key)
        if v is None:
            return [default] * nsp
        if isinstance(v, int):
            return [v] * nsp
        v = [int(e) for e in v]
        if len(v) != nsp:
            raise BadParamError(f"{node.name}: {key} has {len(v)} entries for {nsp} spatial dims")
        return v

    pad = a.get("padding")
    pre = vec("pre_padding" if a.get("pre_padding") is not None else "padding", 0)
    post = vec("post_padding" if a.get("post_padding") is not None else "padding", 0)
    del pad
    return pre, post, vec("stride", 1), vec("dilation", 1)


def lowered_attrs(node) -> dict:
    """The node's parameters as they are lowered: a convolution's padding, stride and dilation
    in their per-spatial-dimension form (from ``padding`` or the explicit vectors)."""
    if not node.kind.startswith("conv_"):
        return node.attrs
    ref = node.inputs.get("x") or node.inputs.get("dy")
    pre, post, st, dil = conv_params(node, len(ref.dim) - 2)
    return {**node.attrs, "pre_padding": pre, "post_padding": post, "stride": st, "dilation": dil}


def read_attrs(kind, attrs) -> dict:
    """Parameters read back from descriptors, completed with the keys the builders add that
    have no attribute of their own (a convolution's symmetric ``padding``)."""
    if kind.startswith("conv_"):
        attrs.setdefault("padding", None)
    return attrs


def _tn(t):
    return repr(t.name) if t.name else f"uid {t.uid}"


def _op(node):
    return f"{node.kind} {node.name!r}"


def _same_rank(node, **ts):
    (ra, a), (rb, b) = list(ts.items())
    if len(a.dim) < 3:
        raise BadParamError(f"{_op(node)}: {ra} ({_tn(a)}) has {len(a.dim)} dims {list(a.dim)}; a "
                            "convolution needs N, C and at least one spatial dim")
    if len(a.dim) != len(b.dim):
        raise BadParamError(f"{_op(node)}: {ra} ({_tn(a)}) is {len(a.dim)}-D {list(a.dim)} but {rb} "
                            f"({_tn(b)}) is {len(b.dim)}-D {list(b.dim)}: they need the same rank")


def _channels(node, ra, a, ca, rb, b, cb):
    """a.dim[ca] must be a positive multiple of b.dim[cb] (equal, or grouped)."""
    A, B = int(a.dim[ca]), int(b.dim[cb])
    if B <= 0 or A % B:
        raise BadParamError(f"{_op(node)}: channel mismatch: {ra} ({_tn(a)}) has {A} channels "
                            f"(dims {list(a.dim)}) but {rb} ({_tn(b)}) expects {B} (dims {list(b.dim)})")
    return A // B


def _positive(node, role, t, dims):
    if any(d <= 0 for d in dims):
        raise BadParamError(f"{_op(node)}: {role} ({_tn(t)}) would have dims {list(dims)}: the "
                            "filter, padding, stride and dilation do not fit the input")


def infer_conv(node):
    i, o = node.inputs, node.outputs
    if node.kind == "conv_fprop":
        x, w, y = i["x"], i["w"], o["y"]
        if not _known(x, w):
            return
        _same_rank(node, x=x, w=w)
        groups = _channels(node, "x", x, 1, "w", w, 1)
        if int(w.dim[0]) % groups:
            raise BadParamError(f"{_op(node)}: {groups} groups do not divide the {w.dim[0]} filters "
                                f"of w ({_tn(w)})")
        nsp = len(x.dim) - 2
        pre, post, st, dil = conv_params(node, nsp)
        out = [(x.dim[2 + k] + pre[k] + post[k] - dil[k] * (w.dim[2 + k] - 1) - 1) // st[k] + 1
               for k in range(nsp)]
        dims = [x.dim[0], w.dim[0]] + out
        _positive(node, "y", y, dims)
        fill(y, dims, x, node, "y")
    elif node.kind == "conv_dgrad":
        dy, w, dx = i["dy"], i["w"], o["dx"]
        if not _known(dy, w):
            return
        _same_rank(node, dy=dy, w=w)
        if int(dy.dim[1]) != int(w.dim[0]):
            raise BadParamError(f"{_op(node)}: channel mismatch: dy ({_tn(dy)}) has {dy.dim[1]} "
                                f"channels but w ({_tn(w)}) has {w.dim[0]} filters")
        nsp = len(dy.dim) - 2
        pre, post, st, dil = conv_params(node, nsp)
        inn = [(dy.dim[2 + k] - 1) * st[k] - pre[k] - post[k] + dil[k] * (w.dim[2 + k] - 1) + 1
               for k in range(nsp)]
        if dx is not None and dx.dim is not None and len(dx.dim) == len(dy.dim):
            return _positive(node, "dx", dx, dx.dim)   # dx dims given (strided dgrad is ambiguous)
        _positive(node, "dx", dx, inn)
        fill(dx, [dy.dim[0], w.dim[1]] + inn, dy)
    else:
        x, dy, dw = i["x"], i["dy"], o["dw"]
        if not _known(x, dy):
            return
        _same_rank(node, x=x, dy=dy)
        if int(x.dim[0]) != int(dy.dim[0]):
            raise BadParamError(f"{_op(node)}: batch mismatch: x ({_tn(x)}) has N={x.dim[0]}, dy "
                                f"({_tn(dy)}) has N={dy.dim[0]}")
        nsp = len(x.dim) - 2
        pre, post, st, dil = conv_params(node, nsp)
        ks = [(x.dim[2 + k] + pre[k] + post[k] - (dy.dim[2 + k] - 1) * st[k] - 1) // dil[k] + 1
              for k in range(nsp)]
        if dw is not None and dw.dim is not None and len(dw.dim) == len(x.dim):
            if int(dw.dim[0]) != int(dy.dim[1]):
                raise BadParamError(f"{_op(node)}: dw ({_tn(dw)}) has {dw.dim[0]} filters but dy "
                                    f"({_tn(dy)}) has {dy.dim[1]} channels")
            return
        _positive(node, "dw", dw, ks)
        fill(dw, [dy.dim[1], x.dim[1]] + ks, x)


def broadcast(*dims, node=None, names=None):
    try:
        return list(np.broadcast_shapes(*[tuple(d) for d in dims]))
    except ValueError:
        where = f"{_op(node)}: " if node is not None else ""
        what = ", ".join(f"{n} {list(d)}" for n, d in zip(names, dims)) if names else \
            str([list(d) for d in dims])
        raise BadParamError(f"{where}shapes do not broadcast: {what}") from None


def infer_pointwise(node):
    ins = [(r, t) for r, t in node.inputs.items() if t is not None]
    if not _known(*[t for _, t in ins]):
        return
    shape = broadcast(*[t.dim for _, t in ins], node=node,
                      names=[f"{r} ({_tn(t)})" for r, t in ins])
    out = node.outputs["out_0"]
    if out is not None and out.dim is not None and list(out.dim) != shape:
        # an output may be larger only by broadcasting (never smaller than the inputs' shape)
        if broadcast(out.dim, shape, node=node, names=["output", "inputs"]) != list(out.dim):
            raise BadParamError(f"{_op(node)}: output ({_tn(out)}) dims {list(out.dim)} do not hold "
                                f"the inputs' broadcast shape {shape}")
    dims = list(out.dim) if out is not None and out.dim is not None else shape
    if out is not None and out.stride is None:
        # as cudnn-frontend infers them: the strides of the first input with the output's dims
        # (a strided input gives a strided output, so an in-place output is its input's layout);
        # else packed in the first input's stride order.  An input whose strides overlap
        # elements (a 0 stride on a dim > 1, a broadcast view) gives packed strides instead.
        same = next((t for _, t in ins if list(t.dim) == dims and t.stride is not None
                     and len(t.stride) == len(dims)), None)
        if same is not None and not _overlapping(same.dim, same.stride):
            out.stride = [int(e) for e in same.stride]
    fill(out, shape, next((t for _, t in ins if list(t.dim) == shape), ins[0][1]))


def _overlapping(dims, strides) -> bool:
    """Whether two index tuples of a (dims, strides) layout can share an element."""
    ext = sorted((int(s), int(d)) for d, s in zip(dims, strides) if int(d) > 1)
    reach = 0
    for s, d in ext:
        if s <= reach:
            return True
        reach += s * (d - 1)
    return False


def infer_matmul(node):
    a, b = node.inputs["a"], node.inputs["b"]
    if not _known(a, b):
        return
    if len(a.dim) < 2 or len(b.dim) < 2:
        raise BadParamError(f"{_op(node)}: matmul operands need rank >= 2: a ({_tn(a)}) {list(a.dim)}, "
                            f"b ({_tn(b)}) {list(b.dim)}")
    if int(a.dim[-1]) != int(b.dim[-2]):
        raise BadParamError(f"{_op(node)}: K mismatch: a ({_tn(a)}) is {list(a.dim)} (K = {a.dim[-1]}) "
                            f"but b ({_tn(b)}) is {list(b.dim)} (K = {b.dim[-2]})")
    batch = broadcast(a.dim[:-2], b.dim[:-2], node=node, names=["a batch", "b batch"])
    fill(node.outputs["c"], batch + [a.dim[-2], b.dim[-1]], a, node, "c")


def channel_dims(x):
    return [1, x.dim[1]] + [1] * (len(x.dim) - 2)


def infer_batchnorm(node):
    i, o = node.inputs, node.outputs
    x = i.get("x") if node.kind != "batchnorm_backward" else i.get("x")
    if not _known(x):
        return
    if len(x.dim) < 2:
        raise BadParamError(f"{_op(node)}: x ({_tn(x)}) needs N and C dims, has {list(x.dim)}")
    C = int(x.dim[1])
    for role in ("scale", "bias", "mean", "inv_variance", "variance", "prev_running_mean",
                 "prev_running_variance"):
        t = i.get(role)
        if _known(t) and int(np.prod(t.dim, dtype=np.int64)) != C:
            raise BadParamError(f"{_op(node)}: {role} ({_tn(t)}) has dims {list(t.dim)} "
                                f"({int(np.prod(t.dim, dtype=np.int64))} elements) but x ({_tn(x)}) "
                                f"has C = {C} channels (expected [1, {C}, 1, ...])")
    if node.kind == "batchnorm_backward":
        fill(o.get("dx"), x.dim, x)
        sc = i.get("scale")
        ref = sc.dim if _known(sc) else channel_dims(x)
        fill(o.get("dscale"), ref, sc)
        fill(o.get("dbias"), ref, sc)
        return
    fill(o.get("y"), x.dim, x)
    if node.kind == "batchnorm":
        fill(o.get("mean"), channel_dims(x))
        fill(o.get("inv_variance"), channel_dims(x))
        for src, dst in (("prev_running_mean", "next_running_mean"),
                         ("prev_running_variance", "next_running_variance")):
            p = i.get(src)
            fill(o.get(dst), p.dim if _known(p) else channel_dims(x), p)


def norm_stats_dims(node):
    x, sc = node.inputs["x"], node.inputs.get("scale")
    n = len(x.dim)
    k = node.attrs.get("normalized_dim_count")
    if k:
        axes = range(n - int(k), n)
    elif _known(sc) and len(sc.dim) == n and any(d != 1 for d in sc.dim):
        first = next(j for j, d in enumerate(sc.dim) if d != 1)
        axes = range(first, n)
    else:
        axes = range(1, n)
    return [1 if j in axes else d for j, d in enumerate(x.dim)]


def infer_norm(node):
    x = node.inputs["x"]
    if not _known(x):
        return
    o = node.outputs
    fill(o.get("y"), x.dim, x)
    stats = norm_stats_dims(node)
    for r in ("mean", "inv_variance", "inv_rms"):
        fill(o.get(r), stats)


def sdpa_kv_len(node):
    """The logical key/value length: k's S, or for a paged k (a [pages, Hkv, page_size, D] pool)
    max_seq_len_kv, else the page table's pages times the page size."""
    i = node.inputs
    k, tab = i["k"], i.get("page_table_k")
    if tab is None:
        k, tab = i["v"], i.get("page_table_v")
        if tab is None:
            return i["k"].dim[2] if _known(i["k"]) else None
    if node.attrs.get("max_seq_len_kv") is not None:
        return int(node.attrs["max_seq_len_kv"])
    if _known(k, tab) and len(tab.dim) == 4:
        return tab.dim[2] * k.dim[2]
    return None


def infer_sdpa(node):
    i, o = node.inputs, node.outputs
    q, k, v = i["q"], i["k"], i["v"]
    if node.kind == "sdpa":
        if not _known(q, v):
            return
        if len(q.dim) != 4 or len(v.dim) != 4:
            raise BadParamError(f"{node.name}: q/k/v must be 4-d [B, H, S, D]")
        fill(o.get("o"), [q.dim[0], q.dim[1], q.dim[2], v.dim[3]], q)
        for r in ("stats", "max", "sum_exp"):
            fill(o.get(r), [q.dim[0], q.dim[1], q.dim[2], 1])
        for r in ("amax_s", "amax_o"):
            fill(o.get(r), [1, 1, 1, 1])
        skv = sdpa_kv_len(node)
        if skv is not None:
            fill(o.get("rng_dump"), [q.dim[0], q.dim[1], q.dim[2], skv])
        return
    for g, x in (("dq", q), ("dk", k), ("dv", v)):
        if _known(x):
            fill(o.get(g), x.dim, x)
    m = i.get("attn_mask")
    if _known(m):
        fill(o.get("dbias"), m.dim, m)


# ---- norm backward, resample, block scale, MoE ---------------------------------------------
def infer_norm_backward(node):
    i, o = node.inputs, node.outputs
    x, sc = i.get("x"), i.get("scale")
    if not _known(x):
        return
    fill(o.get("dx"), x.dim, x)
    ref = sc.dim if _known(sc) else [1] + list(x.dim[1:])
    for r in ("dscale", "dbias"):
        fill(o.get(r), ref, sc)


def infer_resample(node):
    a, i, o = node.attrs, node.inputs, node.outputs
    win, st, pre, post = a["window"], a["stride"], a["pre_padding"], a["post_padding"]
    nsp = len(win)
    if node.kind == "resample":
        x = i["x"]
        if not _known(x):
            return
        if len(x.dim) != nsp + 2:
            raise BadParamError(f"{node.name}: window has {len(win)} dims for a "
                                f"{len(x.dim)}-D input")
        out = []
        for k in range(nsp):
            span = x.dim[2 + k] + pre[k] + post[k] - win[k]
            if span < 0:
                raise BadParamError(f"{node.name}: window {win[k]} is larger than the padded "
                                    f"input ({x.dim[2 + k] + pre[k] + post[k]})")
            out.append(span // st[k] + 1)
        dims = list(x.dim[:2]) + out
        fill(o.get("y"), dims, x)
        fill(o.get("index"), dims, x)
    else:
        dy = i["dy"]
        if not _known(dy):
            return
        inn = [(dy.dim[2 + k] - 1) * st[k] + win[k] - pre[k] - post[k] for k in range(nsp)]
        fill(o.get("dx"), list(dy.dim[:2]) + inn, dy)


def _packed_axis_strides(dims, ref, axis):
    """Strides for dims in ref's order but with ``axis`` innermost (block-scale ``transpose``)."""
    order = stride_order(ref.stride) if ref.stride is not None and len(ref.stride) == len(dims) \
        else list(range(len(dims) - 1, -1, -1))
    order = [axis] + [ax for ax in order if ax != axis]
    return packed_strides(dims, order)


def infer_block_scale(node):
    i, o, a = node.inputs, node.outputs, node.attrs
    x = i["x"]
    if not _known(x):
        return
    n = len(x.dim)
    if node.kind == "block_scale_quantize":
        ax = n - 1 if a.get("axis") is None else int(a["axis"])
        if not 0 <= ax < n:
            raise BadParamError(f"{node.name}: axis {ax} out of range for rank {n}")
        bs = int(a["block_size"])
        if bs <= 0 or x.dim[ax] % bs:
            raise BadParamError(f"{node.name}: block_size {bs} must be positive and divide "
                                f"dim {ax} ({x.dim[ax]})")
        sdims = [d // bs if k == ax else d for k, d in enumerate(x.dim)]
        for role, dims in (("y", list(x.dim)), ("scale", sdims)):
            t = o[role]
            if t.dim is None:
                t.dim = dims
            if t.stride is None:
                t.stride = (_packed_axis_strides(dims, x, ax) if a.get("transpose")
                            else like_strides(dims, x))
    else:
        fill(o.get("y"), x.dim, x)


def infer_moe(node):
    i, o = node.inputs, node.outputs
    if node.kind == "moe_grouped_matmul":
        tok, w, ti = i["token"], i["weight"], i.get("token_index")
        if not _known(tok, w):
            return
        if len(tok.dim) != 3 or len(w.dim) != 3:
            raise BadParamError(f"{node.name}: token must be [1, T, K] and weight [E, K, N]")
        gather = int(node.attrs.get("mode") or 0) == 1
        if gather and not _known(ti):
            return
        rows = ti.dim[1] if gather else tok.dim[1]
        fill(o["output"], [1, rows, w.dim[2]])
    else:
        do, tok, off = i["doutput"], i["token"], i["first_token_offset"]
        if not _known(do, tok, off):
            return
        fill(o["dweight"], [off.dim[0], tok.dim[2], do.dim[2]])




INFER = {"conv_fprop": infer_conv, "conv_dgrad": infer_conv, "conv_wgrad": infer_conv,
         "pointwise": infer_pointwise, "matmul": infer_matmul,
         "batchnorm": infer_batchnorm, "batchnorm_inference": infer_batchnorm,
         "batchnorm_inference_variance": infer_batchnorm,
         "batchnorm_backward": infer_batchnorm, "layernorm": infer_norm, "rmsnorm": infer_norm,
         "reduction": lambda node: None, "sdpa": infer_sdpa, "sdpa_backward": infer_sdpa,
         "layernorm_backward": infer_norm_backward, "rmsnorm_backward": infer_norm_backward,
         "resample": infer_resample, "resample_backward": infer_resample,
         "block_scale_quantize": infer_block_scale, "block_scale_dequantize": infer_block_scale,
         "moe_grouped_matmul": infer_moe, "moe_grouped_matmul_backward": infer_moe}
