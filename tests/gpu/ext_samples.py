"""Graphs for the issue-17 GPU families (norms, resample, block scale): used by the NVRTC
compile check (CI, no GPU) and the GPU-vs-CPU tests."""
from __future__ import annotations

from gpu_testlib import FB, T, graph_bytes, node, pw

RM = {"MAXPOOL": 1, "AVGPOOL_EXCLUDE_PADDING": 2, "AVGPOOL_INCLUDE_PADDING": 3}
PM = {"NEG_INF_PAD": 1, "ZERO_PAD": 2}


class R(T):
    """A tensor of a type gpu_testlib.T does not know (narrow floats, ints)."""

    def fb(self):
        d = {"uid": self.uid, "name": f"t{self.uid}", "data_type": FB["DataType"][self.dtype],
             "dims": self.dims, "strides": self.strides}
        if self.value is not None:
            d["value"] = (1, {"value": self.value})
        return d


def ln_fwd(dt, pt, M, D, rms=False, bias=True, stats=True):
    x, sc = T(1, [M, D], dt), T(2, [1, D], pt)
    b = T(3, [1, D], pt)
    eps = T(4, [1, 1], "FLOAT", value=1e-5)
    y = T(5, [M, D], dt)
    m, iv = T(6, [M, 1], pt), T(7, [M, 1], pt)
    if rms:
        ts = [x, sc, eps, y] + ([b] if bias else []) + ([iv] if stats else [])
        a = {"x_tensor_uid": 1, "scale_tensor_uid": 2, "epsilon_tensor_uid": 4, "y_tensor_uid": 5,
             "forward_phase": 2 if stats else 1}
        if bias:
            a["bias_tensor_uid"] = 3
        if stats:
            a["inv_rms_tensor_uid"] = 7
        return ts, graph_bytes(ts, [node("RMSNormAttributes", a)])
    ts = [x, sc, b, eps, y] + ([m, iv] if stats else [])
    a = {"x_tensor_uid": 1, "scale_tensor_uid": 2, "bias_tensor_uid": 3, "epsilon_tensor_uid": 4,
         "y_tensor_uid": 5, "normalized_dim_count": 1, "forward_phase": 2 if stats else 1}
    if stats:
        a.update(mean_tensor_uid=6, inv_variance_tensor_uid=7)
    return ts, graph_bytes(ts, [node("LayernormAttributes", a)])


def ln_pw(dt, pt, M, D, rms=False, gather=False):
    """norm -> (virtual y) -> ADD a row vector -> RELU -> MUL by an x-shaped tensor (+ SCALE by
    a [M, 1] column when ``gather``: read through coordinates) -> out; the statistics written."""
    x, sc, b = T(1, [M, D], dt), T(2, [1, D], pt), T(3, [1, D], pt)
    eps = T(4, [1, 1], "FLOAT", value=1e-5)
    y = T(5, [M, D], "FLOAT", virtual=True)
    m, iv = T(6, [M, 1], pt), T(7, [M, 1], pt)
    rb, v1, v2 = T(8, [1, D], dt), T(9, [M, D], "FLOAT", virtual=True), T(10, [M, D], "FLOAT", virtual=True)
    res, out = T(11, [M, D], dt), T(12, [M, D], dt)
    col, v3 = T(13, [M, 1], "FLOAT"), T(14, [M, D], "FLOAT", virtual=True)
    ts = [x, sc, b, eps, y, m, iv, rb, v1, v2, res, out] + ([col, v3] if gather else [])
    if rms:
        ts = [t for t in ts if t.uid not in (3, 6)]
        nn = node("RMSNormAttributes", {"x_tensor_uid": 1, "scale_tensor_uid": 2, "epsilon_tensor_uid": 4,
                                        "y_tensor_uid": 5, "inv_rms_tensor_uid": 7, "forward_phase": 2})
    else:
        nn = node("LayernormAttributes", {"x_tensor_uid": 1, "scale_tensor_uid": 2, "bias_tensor_uid": 3,
                                          "epsilon_tensor_uid": 4, "y_tensor_uid": 5, "normalized_dim_count": 1,
                                          "forward_phase": 2, "mean_tensor_uid": 6, "inv_variance_tensor_uid": 7})
    ns = [nn, pw("ADD", 5, 9, 8), pw("RELU_FWD", 9, 10)]
    ns += [pw("MUL", 10, 14, 11), pw("MUL", 14, 12, 13)] if gather else [pw("MUL", 10, 12, 11)]
    return ts, graph_bytes(ts, ns)


def ln_bwd(dt, pt, M, D, rms=False, dbias=True):
    dy, x, sc = T(1, [M, D], dt), T(2, [M, D], dt), T(3, [1, D], pt)
    m, iv = T(4, [M, 1], pt), T(5, [M, 1], pt)
    dx, ds, db = T(6, [M, D], dt), T(7, [1, D], pt), T(8, [1, D], pt)
    if rms:
        ts = [dy, x, sc, iv, dx, ds] + ([db] if dbias else [])
        a = {"dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3, "inv_rms_tensor_uid": 5,
             "dx_tensor_uid": 6, "dscale_tensor_uid": 7}
        if dbias:
            a["dbias_tensor_uid"] = 8
        return ts, graph_bytes(ts, [node("RMSNormBackwardAttributes", a)])
    ts = [dy, x, sc, m, iv, dx, ds, db]
    a = {"dy_tensor_uid": 1, "x_tensor_uid": 2, "scale_tensor_uid": 3, "mean_tensor_uid": 4,
         "inv_variance_tensor_uid": 5, "dx_tensor_uid": 6, "dscale_tensor_uid": 7,
         "dbias_tensor_uid": 8, "normalized_dim_count": 1}
    return ts, graph_bytes(ts, [node("LayernormBackwardAttributes", a)])


def pool_attrs(win, st, pre, post, mode, pmode):
    a = dict(window=list(win), stride=list(st), pre_padding=list(pre), post_padding=list(post),
             resample_mode=RM[mode])
    if pmode:
        a["padding_mode"] = PM[pmode]
    return a


def pool_fwd(dt, lay, xd, win, st, pre, post, mode, pmode, index=True):
    nsp = len(xd) - 2
    yd = xd[:2] + [(xd[2 + k] + pre[k] + post[k] - win[k]) // st[k] + 1 for k in range(nsp)]
    x, y = T(1, xd, dt, lay), T(2, yd, dt, lay)
    ts = [x, y]
    a = {"x_tensor_uid": 1, "y_tensor_uid": 2, **pool_attrs(win, st, pre, post, mode, pmode)}
    if index and mode == "MAXPOOL":
        ts.append(R(3, yd, "INT32", lay))
        a.update(index_tensor_uid=3, generate_index=True)
    return ts, graph_bytes(ts, [node("ResampleFwdAttributes", a)])


def pool_bwd(dt, lay, xd, win, st, pre, post, mode, pmode):
    nsp = len(xd) - 2
    yd = xd[:2] + [(xd[2 + k] + pre[k] + post[k] - win[k]) // st[k] + 1 for k in range(nsp)]
    dy, dx = T(1, yd, dt, lay), T(2, xd, dt, lay)
    ts = [dy, dx]
    a = {"dy_tensor_uid": 1, "dx_tensor_uid": 2, **pool_attrs(win, st, pre, post, mode, pmode)}
    if mode == "MAXPOOL":
        ts.append(R(3, yd, "INT32", lay))
        a["index_tensor_uid"] = 3
    return ts, graph_bytes(ts, [node("ResampleBwdAttributes", a)])


def bsq(xt, yt, st, dims, bs, axis=None, lay="nchw"):
    ax = len(dims) - 1 if axis is None else axis
    sd = [d // bs if k == ax else d for k, d in enumerate(dims)]
    x, y, s = T(1, dims, xt, lay), R(2, dims, yt, lay), R(3, sd, st, lay)
    a = {"x_tensor_uid": 1, "y_tensor_uid": 2, "scale_tensor_uid": 3, "block_size": bs}
    if axis is not None:
        a["axis"] = axis
    return [x, y, s], graph_bytes([x, y, s], [node("BlockScaleQuantizeAttributes", a)])


def bsdq(xt, st, yt, dims, bsv, neg=False, lay="nchw"):
    full = [1] * (len(dims) - len(bsv)) + bsv
    sd = [d // b for d, b in zip(dims, full)]
    x, s, y = R(1, dims, xt, lay), R(2, sd, st, lay), T(3, dims, yt, lay)
    return [x, s, y], graph_bytes([x, s, y], [node("BlockScaleDequantizeAttributes", {
        "x_tensor_uid": 1, "scale_tensor_uid": 2, "y_tensor_uid": 3, "block_size": bsv,
        "is_negative_scale": neg})])


def ext_sample_graphs():
    out = []
    for dt in ("FLOAT", "HALF", "BFLOAT16"):
        pt = "FLOAT"
        for rms in (False, True):
            out.append((f"{'rms' if rms else 'ln'}_fwd_{dt}", ln_fwd(dt, pt, 16, 1000, rms)[1]))
            out.append((f"{'rms' if rms else 'ln'}_fwd_vec_{dt}", ln_fwd(dt, dt, 8, 4096, rms)[1]))
            out.append((f"{'rms' if rms else 'ln'}_bwd_{dt}", ln_bwd(dt, pt, 16, 1024, rms)[1]))
            out.append((f"{'rms' if rms else 'ln'}_pw_{dt}", ln_pw(dt, pt, 8, 4096, rms, gather=rms)[1]))
        for lay in ("nchw", "nhwc"):
            out.append((f"maxpool_{dt}_{lay}", pool_fwd(dt, lay, [2, 8, 9, 9], [3, 3], [2, 2], [1, 1],
                                                         [1, 1], "MAXPOOL", "NEG_INF_PAD")[1]))
            out.append((f"avgpool3d_{dt}_{lay}", pool_fwd(dt, lay, [2, 4, 5, 6, 6], [2, 2, 2], [2, 2, 2],
                                                           [0, 1, 1], [1, 0, 1], "AVGPOOL_EXCLUDE_PADDING", None)[1]))
            out.append((f"maxpool_bwd_{dt}_{lay}", pool_bwd(dt, lay, [2, 8, 9, 9], [3, 3], [2, 2], [1, 1],
                                                             [1, 1], "MAXPOOL", "ZERO_PAD")[1]))
            out.append((f"avgpool_bwd_{dt}_{lay}", pool_bwd(dt, lay, [2, 8, 9, 9], [3, 3], [2, 2], [1, 1],
                                                             [1, 1], "AVGPOOL_INCLUDE_PADDING", None)[1]))
        for yt, st in (("FP8_E4M3", "FP8_E8M0"), ("FP8_E5M2", "FP8_E8M0"), ("FP4_E2M1", "FP8_E4M3"),
                       ("INT8", "FLOAT"), ("FP8_E4M3_FNUZ", "HALF"), ("FP6_E3M2", "BFLOAT16")):
            out.append((f"bsq_{dt}_{yt}_{st}", bsq(dt, yt, st, [4, 64], 32)[1]))
            out.append((f"bsdq_{yt}_{st}_{dt}", bsdq(yt, st, dt, [4, 64], [32])[1]))
        out.append((f"bsq_axis0_{dt}", bsq(dt, "FP8_E4M3", "FP8_E8M0", [64, 8], 32, axis=0)[1]))
    return out + moe_samples()


def moe(dt, mode, S, K, N, E, G=None, top_k=2, ot=None, w_k_contig=False):
    """w_k_contig: weight [E, K, N] stored K-contiguous (strides K*N, 1, K: cuDNN's MoE layout)."""
    G = G or E
    rows = S * top_k if mode == "GATHER" else S
    tok = T(1, [1, S, K], dt)
    w = T(2, [E, K, N], dt, strides=[K * N, 1, K] if w_k_contig else None)
    off = R(3, [G, 1, 1], "INT32")
    out = T(4, [1, rows, N], ot or dt)
    ts = [tok, w, off, out]
    a = {"token_tensor_uid": 1, "weight_tensor_uid": 2, "first_token_offset_tensor_uid": 3,
         "output_tensor_uid": 4, "mode": {"NONE": 0, "GATHER": 1, "SCATTER": 2}[mode], "top_k": top_k}
    if mode != "NONE":
        ts.append(R(5, [1, rows, 1], "INT32"))
        a["token_index_tensor_uid"] = 5
    if mode == "SCATTER":
        ts.append(R(6, [1, rows, 1], "INT32"))
        a["token_ks_tensor_uid"] = 6
    return ts, graph_bytes(ts, [node("MoeGroupedMatmulAttributes", a)])


def moe_bwd(dt, S, K, N, E, ot=None):
    """MoE weight gradient: doutput [1, S, N], token [1, S, K], offsets [E, 1, 1] -> dweight."""
    do, tok = T(1, [1, S, N], dt), T(2, [1, S, K], dt)
    off = R(3, [E, 1, 1], "INT32")
    dw = T(4, [E, K, N], ot or dt)
    ts = [do, tok, off, dw]
    return ts, graph_bytes(ts, [node("MoeGroupedMatmulBwdAttributes", {
        "doutput_tensor_uid": 1, "token_tensor_uid": 2, "first_token_offset_tensor_uid": 3,
        "dweight_tensor_uid": 4})])


def moe_samples():
    out = []
    for dt in ("FLOAT", "HALF", "BFLOAT16"):
        for mode in ("NONE", "GATHER", "SCATTER"):
            out.append((f"moe_{mode}_{dt}", moe(dt, mode, 40, 64, 48, 4)[1]))
        out.append((f"moe_kcontig_{dt}", moe(dt, "NONE", 40, 64, 48, 4, w_k_contig=True)[1]))
        out.append((f"moe_bwd_{dt}", moe_bwd(dt, 40, 64, 48, 4)[1]))
    return out
