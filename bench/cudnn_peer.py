"""cuDNN's graph API as a benchmark peer (`gpu_bench.py --only cudnnpeer`).

Each row is ONE graph recipe built twice in one process: through this project's frontend
(``hipdnn_cabi.frontend`` -> C API -> the HIP engine) and through cudnn-frontend's ``pygraph``
(the ``nvidia-cudnn-frontend`` wheel over the device's cuDNN 9).  Both graphs read the same
torch input buffers; each side writes its own output buffers so that each has its own error
against an fp32 reference computed by PyTorch.  Times are interleaved CUDA-event medians on
PyTorch's current stream (both handles run on it); ``ratio_vs_cudnn`` = cuDNN time / ours (> 1:
ours is faster).  PyTorch's own op (``torch_ms``) is timed in the same loop for context.

The recipes are data (``recipes()``: tensor specs, graph data types, a builder written against the
pygraph API that both frontends share) and import neither torch nor cudnn, so the CPU tests
(tests/gpu/test_cudnn_peer.py) build every recipe through this project's frontend and through a
stand-in of cudnn-frontend 1.23's pygraph signatures.  The differences between the two frontends
live in the two ``Side`` classes: enum spellings, epsilon / momentum (cudnn-frontend: a
pass-by-value tensor with a host buffer; ours: a compile-time constant), batchnorm statistics
(cudnn-frontend ``genstats``; hipDNN has no GENSTATS operation, so ours is the same sums as
REDUCTION ADD nodes), build and execute calls.

A row that fails on one side records ``ours_error`` / ``cudnn_error`` (the exception text) and
keeps the other side's numbers; the group never stops on one row.
"""
from __future__ import annotations

import copy
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

from bench_knobs import hip_knobs

REPS, WARM = 15, 3
SAMPLE_MS = 0.5


# ------------------------------------------------------------------ recipes as data (no torch)
@dataclass(frozen=True)
class Spec:
    """A buffer: hipDNN data type name, dims, layout ("row": packed row-major; "nhwc": channels
    innermost, what torch.channels_last gives) and how inputs are filled."""
    dtype: str
    dims: tuple
    layout: str = "row"
    init: tuple = ("randn", 1.0, 0.0)     # (randn | rand, scale, offset)

    @property
    def strides(self):
        return strides_of(self.dims, self.layout)

    @property
    def numel(self):
        return math.prod(self.dims)


def strides_of(dims, layout="row"):
    """Packed strides of ``dims``; "nhwc" orders N, spatial..., C (channels innermost) like
    torch.channels_last / channels_last_3d."""
    n = len(dims)
    order = [0] + list(range(2, n)) + [1] if layout == "nhwc" and n >= 3 else list(range(n))
    st, acc = [0] * n, 1
    for ax in reversed(order):
        st[ax] = acc
        acc *= dims[ax]
    return st


ELEM = {"HALF": 2, "BFLOAT16": 2, "FLOAT": 4}


@dataclass(frozen=True)
class Recipe:
    key: str                  # row name in the JSON
    mirrors: str              # the gpu_bench group that times the same op against PyTorch
    io: str                   # graph io data type (intermediate and compute are FLOAT)
    inputs: dict              # name -> Spec (shared by both sides)
    outputs: dict             # name -> Spec (one buffer per side)
    build: object             # build(api, g, t) -> {output name: graph tensor}
    work: tuple               # ("flop", n) or ("bytes", n): for TFLOP/s or GB/s
    derived: tuple = ()       # inputs computed from other inputs (statistics, attention output)
    note: str = ""
    params: dict = field(default_factory=dict)


def _conv_kw(api, pad=1, st=1):
    return dict(padding=[pad, pad], stride=[st, st], dilation=[1, 1], compute_data_type=api.F32)


def b_conv_bias_relu(api, g, t):
    y = g.conv_fprop(image=t["x"], weight=t["w"], name="conv", **_conv_kw(api))
    y = g.bias(input=y, bias=t["b"], name="add_bias")
    return {"y": g.relu(input=y, name="relu")}


def b_dgrad_drelu(api, g, t):
    dxv = g.conv_dgrad(loss=t["dy"], filter=t["w"], name="dgrad", **_conv_kw(api))
    xs = api.spec("xa")           # cudnn-frontend cannot infer dgrad's output dims: set them
    dxv.set_dim(list(xs.dims)).set_stride(xs.strides)
    return {"dx": g.relu_backward(loss=dxv, input=t["xa"], name="drelu")}


def b_wgrad(api, g, t):
    return {"dw": g.conv_wgrad(image=t["x"], loss=t["dy"], name="wgrad", **_conv_kw(api))}


def b_conv_genstats(api, g, t):
    y = g.conv_fprop(image=t["x"], weight=t["w"], name="conv", **_conv_kw(api))
    s, sq = api.genstats(g, y)
    return {"y": y, "sum": s, "sq_sum": sq}


def b_matmul(api, g, t):
    return {"c": g.matmul(A=t["a"], B=t["b"], compute_data_type=api.F32, name="mm")}


def _b_matmul_act(act):
    def build(api, g, t):
        c = g.matmul(A=t["a"], B=t["b"], compute_data_type=api.F32, name="mm")
        c = g.bias(input=c, bias=t["bias"], name="add_bias")
        return {"c": getattr(g, act)(input=c, name=act)}
    build.__name__ = f"b_matmul_bias_{act}"
    return build


def b_layernorm(api, g, t):
    y, m, iv = g.layernorm(norm_forward_phase=api.TRAINING, input=t["x"], scale=t["scale"],
                           bias=t["bias"], epsilon=api.scalar(g, "epsilon", 1e-5),
                           compute_data_type=api.F32, name="ln")
    return {"y": y, "mean": m, "inv_variance": iv}


# the norm backward's row kernels timed side by side: ours = the engine's choice (the opt-in
# V2 kernel when the bench turns OPT_IN on), ours_v1 = the V1 row kernel + column kernel
# (NORM_BWD_V2=0), ours_v2s2 / ours_v2s6 = V2 with 2 / 6 shared-memory stages forced
NORM_BWD_KNOBS = {"v1": {"NORM_BWD_V2": "0"}, "v2s2": {"NORM_BWD_V2": "2"}, "v2s6": {"NORM_BWD_V2": "6"}}
NORM_BWD_NOTE = ("ours: the opt-in V2 row kernel (persistent, cp.async-staged rows) where the bench turns "
                 "OPT_IN on; ours_v1: NORM_BWD_V2=0 (the V1 row kernel); ours_v2s2 / ours_v2s6: V2 with "
                 "2 / 6 stages")


def b_layernorm_bwd(api, g, t):
    dx, ds, db = g.layernorm_backward(grad=t["dy"], input=t["x"], scale=t["scale"],
                                      mean=t["mean"], inv_variance=t["inv_variance"],
                                      compute_data_type=api.F32, name="dln")
    return {"dx": dx, "dscale": ds, "dbias": db}


def b_rmsnorm(api, g, t):
    y, iv = g.rmsnorm(norm_forward_phase=api.TRAINING, input=t["x"], scale=t["scale"],
                      epsilon=api.scalar(g, "epsilon", 1e-5), compute_data_type=api.F32, name="rms")
    return {"y": y, "inv_rms": iv}


def b_rmsnorm_bwd(api, g, t):
    dx, ds, _ = g.rmsnorm_backward(grad=t["dy"], input=t["x"], scale=t["scale"],
                                   inv_variance=t["inv_rms"], has_dbias=False,
                                   compute_data_type=api.F32, name="drms")
    return {"dx": dx, "dscale": ds}


def b_sdpa(api, g, t):
    d = api.spec("q").dims[-1]
    o, st = g.sdpa(q=t["q"], k=t["k"], v=t["v"], attn_scale=1.0 / math.sqrt(d), generate_stats=True,
                   use_causal_mask=True, compute_data_type=api.F32, name="sdpa")
    return {"o": o, "stats": st}


def b_sdpa_bwd(api, g, t):
    d = api.spec("q").dims[-1]
    dq, dk, dv = g.sdpa_backward(q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["dO"], stats=t["stats"],
                                 attn_scale=1.0 / math.sqrt(d), use_causal_mask=True,
                                 compute_data_type=api.F32, name="sdpa_bwd")
    return {"dq": dq, "dk": dk, "dv": dv}


def b_batchnorm(api, g, t):
    y, m, iv, rm, rv = g.batchnorm(input=t["x"], scale=t["scale"], bias=t["bias"],
                                   in_running_mean=t["running_mean"], in_running_var=t["running_var"],
                                   epsilon=api.scalar(g, "epsilon", 1e-5),
                                   momentum=api.scalar(g, "momentum", 0.1),
                                   compute_data_type=api.F32, name="bn")
    return {"y": y, "mean": m, "inv_variance": iv, "next_running_mean": rm, "next_running_var": rv}


def b_batchnorm_bwd(api, g, t):
    dx, ds, db = g.batchnorm_backward(grad=t["dy"], input=t["x"], scale=t["scale"], mean=t["mean"],
                                      inv_variance=t["inv_variance"], compute_data_type=api.F32,
                                      name="dbn")
    return {"dx": dx, "dscale": ds, "dbias": db}


SIZES = {  # the benchmark's sizes
    "conv": dict(N=32, C=64, K=64, H=56, R=3),
    "mm": dict(M=8192, N=8192, K=8192),
    "norm": dict(M=16384, D=4096),
    "sdpa": dict(B=8, H=16, S=4096, D=128),
    "bn": dict(N=32, C=256, H=56),
}


def recipes(sizes=None):
    """The peer rows at ``sizes`` (default SIZES; tests pass small ones)."""
    z = {k: dict(v) for k, v in SIZES.items()}
    for k, v in (sizes or {}).items():
        z[k].update(v)
    c, m, n, s, b = z["conv"], z["mm"], z["norm"], z["sdpa"], z["bn"]
    N, C, K, H, R = c["N"], c["C"], c["K"], c["H"], c["R"]
    P = H                                     # 3 x 3, stride 1, padding 1
    x = Spec("HALF", (N, C, H, H), "nhwc")
    w = Spec("HALF", (K, C, R, R), "nhwc", ("randn", 1.0 / math.sqrt(C * R * R), 0.0))
    yk = Spec("HALF", (N, K, P, P), "nhwc")
    conv_fl = 2 * N * K * P * P * C * R * R
    stat_k = Spec("FLOAT", (1, K, 1, 1), "nhwc")      # the layout cudnn-frontend infers for genstats
    out = [
        Recipe("conv3x3_bias_relu_fp16_nhwc", "conv", "HALF",
               {"x": x, "w": w, "b": Spec("HALF", (1, K, 1, 1), "nhwc")}, {"y": yk},
               b_conv_bias_relu, ("flop", conv_fl)),
        Recipe("conv3x3_dgrad_drelu_fp16_nhwc", "convbwd", "HALF",
               {"dy": yk, "w": w, "xa": x}, {"dx": x}, b_dgrad_drelu, ("flop", conv_fl),
               note="dx = relu_backward(dgrad(dy, w), xa): xa is the forward activation's input; "
                    "ours_gather: the gathered dgrad GEMM + a separate dReLU kernel (knobs "
                    "DGRAD_IM2COL=0, DGRAD_FUSE=0), ours_gather_fused: the gathered GEMM with "
                    "the dReLU in its epilogue",
               params={"ours_knobs": {"gather": {"DGRAD_IM2COL": "0", "DGRAD_FUSE": "0"},
                                      "gather_fused": {"DGRAD_IM2COL": "0"}}}),
        Recipe("conv3x3_wgrad_fp16_nhwc", "convbwd", "HALF", {"x": x, "dy": yk},
               {"dw": Spec("HALF", (K, C, R, R), "nhwc")}, b_wgrad, ("flop", conv_fl),
               note="ours_split13 / ours_split50: the split-K factor forced (knob SPLITK; the "
                    "default picks 25 for this shape)",
               params={"ours_knobs": {"split13": {"SPLITK": "13"}, "split50": {"SPLITK": "50"}}}),
        Recipe("conv3x3_genstats_fp16_nhwc", "conv", "HALF", {"x": x, "w": w},
               {"y": yk, "sum": stat_k, "sq_sum": stat_k}, b_conv_genstats, ("flop", conv_fl),
               note="cuDNN: conv + GENSTATS; ours: conv + REDUCTION ADD (y) + REDUCTION ADD (y*y) "
                    "(hipDNN has no GENSTATS)"),
    ]
    M, Nn, Kk = m["M"], m["N"], m["K"]
    a = Spec("BFLOAT16", (1, M, Kk))
    bm = Spec("BFLOAT16", (1, Kk, Nn), init=("randn", 1.0 / math.sqrt(Kk), 0.0))
    cm = Spec("BFLOAT16", (1, M, Nn))
    fl = 2 * M * Nn * Kk
    out.append(Recipe(f"matmul_bf16_{M}x{Nn}x{Kk}", "gemm16", "BFLOAT16", {"a": a, "b": bm}, {"c": cm},
                      b_matmul, ("flop", fl)))
    for act in ("relu", "gelu"):
        out.append(Recipe(f"matmul_bias_{act}_bf16_{M}x{Nn}x{Kk}", "gemm16", "BFLOAT16",
                          {"a": a, "b": bm, "bias": Spec("BFLOAT16", (1, 1, Nn))}, {"c": cm},
                          _b_matmul_act(act), ("flop", fl), params={"act": act}))
    Mr, D = n["M"], n["D"]
    # cudnn-frontend's norm layout (its samples): x [rows, D, 1, 1] channels-last, scale / bias
    # [1, D, 1, 1]; the same bytes as row-major [rows, D]
    xn = Spec("BFLOAT16", (Mr, D, 1, 1), "nhwc")
    sc = Spec("BFLOAT16", (1, D, 1, 1), "nhwc", init=("rand", 1.0, 0.5))
    bi = Spec("BFLOAT16", (1, D, 1, 1), "nhwc")
    st = Spec("FLOAT", (Mr, 1, 1, 1))
    nb = Mr * D * 2
    out += [
        Recipe(f"layernorm_fwd_bf16_{Mr}x{D}", "norms", "BFLOAT16", {"x": xn, "scale": sc, "bias": bi},
               {"y": xn, "mean": st, "inv_variance": st}, b_layernorm, ("bytes", 2 * nb)),
        Recipe(f"layernorm_bwd_bf16_{Mr}x{D}", "norms", "BFLOAT16",
               {"dy": xn, "x": xn, "scale": sc, "mean": st, "inv_variance": st},
               {"dx": xn, "dscale": sc, "dbias": bi}, b_layernorm_bwd, ("bytes", 3 * nb),
               derived=("mean", "inv_variance"), note=NORM_BWD_NOTE, params={"ours_knobs": NORM_BWD_KNOBS}),
        Recipe(f"rmsnorm_fwd_bf16_{Mr}x{D}", "norms", "BFLOAT16", {"x": xn, "scale": sc},
               {"y": xn, "inv_rms": st}, b_rmsnorm, ("bytes", 2 * nb)),
        Recipe(f"rmsnorm_bwd_bf16_{Mr}x{D}", "norms", "BFLOAT16",
               {"dy": xn, "x": xn, "scale": sc, "inv_rms": st}, {"dx": xn, "dscale": sc},
               b_rmsnorm_bwd, ("bytes", 3 * nb), derived=("inv_rms",), note=NORM_BWD_NOTE,
               params={"ours_knobs": NORM_BWD_KNOBS}),
    ]
    B, Hh, S, Dh = s["B"], s["H"], s["S"], s["D"]
    q = Spec("BFLOAT16", (B, Hh, S, Dh))
    lse = Spec("FLOAT", (B, Hh, S, 1))
    afl = 4 * B * Hh * S * S * Dh // 2          # causal: half the score matrix
    tag = f"b{B}h{Hh}s{S}d{Dh}_causal"
    out += [
        Recipe(f"sdpa_fwd_bf16_{tag}", "sdpa", "BFLOAT16", {"q": q, "k": q, "v": q},
               {"o": q, "stats": lse}, b_sdpa, ("flop", afl)),
        Recipe(f"sdpa_bwd_bf16_{tag}", "sdpa", "BFLOAT16",
               {"q": q, "k": q, "v": q, "o": q, "dO": q, "stats": lse}, {"dq": q, "dk": q, "dv": q},
               b_sdpa_bwd, ("flop", afl * 5 // 2), derived=("o", "stats"),
               note="o and stats: PyTorch's attention output and log-sum-exp (the same inputs for both)"),
    ]
    Nb, Cb, Hb = b["N"], b["C"], b["H"]
    xb = Spec("HALF", (Nb, Cb, Hb, Hb), "nhwc")
    cp = Spec("FLOAT", (1, Cb, 1, 1))
    bnb = Nb * Cb * Hb * Hb * 2
    out += [
        Recipe(f"batchnorm_train_fwd_fp16_nhwc_{Nb}x{Cb}x{Hb}x{Hb}", "bn", "HALF",
               {"x": xb, "scale": Spec("FLOAT", (1, Cb, 1, 1), init=("rand", 1.0, 0.5)), "bias": cp,
                "running_mean": cp, "running_var": Spec("FLOAT", (1, Cb, 1, 1), init=("rand", 1.0, 0.5))},
               {"y": xb, "mean": cp, "inv_variance": cp, "next_running_mean": cp, "next_running_var": cp},
               b_batchnorm, ("bytes", 2 * bnb)),
        Recipe(f"batchnorm_bwd_fp16_nhwc_{Nb}x{Cb}x{Hb}x{Hb}", "bn", "HALF",
               {"dy": xb, "x": xb, "scale": Spec("FLOAT", (1, Cb, 1, 1), init=("rand", 1.0, 0.5)),
                "mean": cp, "inv_variance": cp},
               {"dx": xb, "dscale": cp, "dbias": cp}, b_batchnorm_bwd, ("bytes", 3 * bnb),
               derived=("mean", "inv_variance")),
    ]
    return out


# ------------------------------------------------------------------ the two frontends
class _Api:
    """What a recipe's builder sees besides the graph: the FLOAT enum, the TRAINING phase, the
    specs, and the side's spelling of scalars and batchnorm statistics."""

    def __init__(self, side, recipe):
        self.side, self.recipe = side, recipe
        self.F32 = side.dt("FLOAT")
        self.TRAINING = side.TRAINING
        self.host = {}                    # scalar name -> (graph tensor, value): by-value host buffers

    def spec(self, name):
        r = self.recipe
        return r.inputs[name] if name in r.inputs else r.outputs[name]

    def scalar(self, g, name, value):
        return self.side.scalar(self, g, name, value)

    def genstats(self, g, y):
        return self.side.genstats(self, g, y)


class Built:
    def __init__(self, g, tensors, outputs, host, workspace_size, engine="", plan=None):
        self.g, self.tensors, self.outputs, self.host = g, tensors, outputs, host
        self.workspace_size, self.engine, self.plan = workspace_size, engine, plan


class Side:
    name = ""
    TRAINING = None

    def engine_of(self, b):
        return b.engine

    def dt(self, name):
        raise NotImplementedError

    def new_graph(self, io):
        raise NotImplementedError

    def finish(self, g):
        """Build the plan; returns the engine's name (or "")."""
        raise NotImplementedError

    def build(self, recipe):
        """The recipe's graph on this side, with its plan built."""
        g, t, outs, host = self.graph(recipe)
        plan = self.plan_notes(g)
        engine = self.finish(g)
        return Built(g, t, outs, host, int(g.get_workspace_size()), engine, plan)

    def plan_notes(self, g):
        return None

    def graph(self, recipe):
        """The recipe's graph on this side (not built): inputs as non-virtual tensors with the
        specs' dims, strides and types, outputs marked with the output specs.  Returns (graph,
        {input: tensor}, {output: tensor}, {scalar name: (tensor, value)})."""
        api = _Api(self, recipe)
        g = self.new_graph(recipe.io)
        t = {n: g.tensor(name=n, dim=list(s.dims), stride=s.strides, data_type=self.dt(s.dtype))
             for n, s in recipe.inputs.items()}
        outs = recipe.build(api, g, t)
        if set(outs) != set(recipe.outputs):
            raise ValueError(f"{recipe.key}: builder outputs {sorted(outs)} != {sorted(recipe.outputs)}")
        for n, s in recipe.outputs.items():
            outs[n].set_output(True).set_dim(list(s.dims)).set_stride(s.strides).set_data_type(self.dt(s.dtype))
            outs[n].set_name(f"out_{n}")
        return g, t, outs, api.host


class OursSide(Side):
    """hipdnn_cabi.frontend on the device stream: the heuristics' device engine (the HIP engine)."""
    name = "ours"

    def __init__(self, stream=None, engine=None):
        from hipdnn_cabi import frontend as hf
        self.hf = hf
        self.TRAINING = hf.NormFwdPhase.TRAINING
        self.handle = hf.Handle(stream=stream) if stream is not None else None
        self.engine = engine              # a preferred engine name (None: the heuristics' choice)

    def dt(self, name):
        return getattr(self.hf.DataType, "HIPDNN_DATA_" + name)

    def new_graph(self, io):
        f = self.dt("FLOAT")
        g = self.hf.Graph(handle=self.handle, io_data_type=self.dt(io), intermediate_data_type=f,
                          compute_data_type=f)
        if self.engine:
            g.set_preferred_engine_name_ext(self.engine)
        return g

    def scalar(self, api, g, name, value):
        return float(value)               # a compile-time constant scalar tensor

    def genstats(self, api, g, y):
        k = list(api.spec("sum").dims)
        s = g.reduction(input=y, mode="ADD", compute_data_type=api.F32, name="sum")
        y2 = g.mul(a=y, b=y, compute_data_type=api.F32, name="square")
        sq = g.reduction(input=y2, mode="ADD", compute_data_type=api.F32, name="sq_sum")
        for o in (s, sq):
            o.set_dim(k)
        return s, sq

    def plan_notes(self, g):
        """The HIP engine's plan for the graph (its analysis notes: core, tiles, fusions)."""
        try:
            from engine_plugins.hip_kernels.engine import analyse
            from hipdnn_cabi.plugin_sdk import parse_graph
            return list(analyse(parse_graph(g.serialize())).program.notes)
        except Exception as e:  # noqa: BLE001 - informational only
            return [f"(no plan notes: {type(e).__name__}: {e})"]

    def finish(self, g):
        g.build()
        return g.engine_name

    def execute(self, b, vp, ws):
        b.g.execute(vp, workspace=ws)

    def engine_of(self, b):
        return b.g.engine_name            # after an execute: the engine that ran


class CudnnSide(Side):
    """cudnn-frontend's pygraph (``module``: the ``cudnn`` package, or a stand-in in tests)."""
    name = "cudnn"

    def __init__(self, module=None, stream=None):
        if module is None:
            import cudnn as module
        self.cudnn = module
        self.TRAINING = module.norm_forward_phase.TRAINING
        self.handle = module.create_handle()
        if stream is not None:
            module.set_stream(handle=self.handle, stream=stream)

    def dt(self, name):
        return getattr(self.cudnn.data_type, name)

    def new_graph(self, io):
        f = self.dt("FLOAT")
        return self.cudnn.pygraph(io_data_type=self.dt(io), intermediate_data_type=f,
                                  compute_data_type=f, handle=self.handle)

    def scalar(self, api, g, name, value):
        # cudnn-frontend's norms take epsilon / momentum as tensors: a by-value [1,1,1,1] FLOAT
        # with a host buffer in the variant pack (its samples' way)
        t = g.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=self.dt("FLOAT"),
                     is_pass_by_value=True)
        api.host[name] = (t, float(value))
        return t

    def genstats(self, api, g, y):
        s, sq = g.genstats(input=y, compute_data_type=api.F32, name="genstats")
        return s, sq

    def finish(self, g):
        c = self.cudnn
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([c.heur_mode.A, c.heur_mode.FALLBACK])
        g.check_support()
        try:
            g.build_plans()                       # the heuristics' first plan
        except Exception:  # noqa: BLE001 - it did not build: the first of the others that does
            g.build_plans(c.build_plan_policy.ALL)
        return "cuDNN " + str(getattr(c, "backend_version_string", lambda: "")())

    def execute(self, b, vp, ws):
        b.g.execute(vp, ws, handle=self.handle)


# ------------------------------------------------------------------ device side (torch)
TORCH_DT = {"HALF": "float16", "BFLOAT16": "bfloat16", "FLOAT": "float32"}
HIP_ENGINE = "HIPDNN_CABI_HIP_KERNELS_ENGINE"


def alloc(torch, spec, fill=True, device="cuda"):
    t = torch.empty_strided(list(spec.dims), spec.strides, dtype=getattr(torch, TORCH_DT[spec.dtype]),
                            device=device)
    if fill:
        kind, a, b = spec.init
        (t.normal_() if kind == "randn" else t.uniform_()).mul_(a).add_(b)
    return t


def interleaved_ms(torch, fns, reps=None, warm=None):
    """{name: median ms per call}: the callables' samples alternate (each sample times ``inner``
    back-to-back calls, ~SAMPLE_MS long, with CUDA events on the current stream)."""
    reps = REPS if reps is None else reps
    warm = WARM if warm is None else warm
    inner = {}
    for k, f in fns.items():
        for _ in range(warm):
            f()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        inner[k] = max(1, min(50, int(SAMPLE_MS / max(a.elapsed_time(b), 1e-3))))
    ts = {k: [] for k in fns}
    names = list(fns)
    for r in range(reps):
        for k in (names if r % 2 == 0 else names[::-1]):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(inner[k]):
                fns[k]()
            b.record()
            b.synchronize()
            ts[k].append(a.elapsed_time(b) / inner[k])
    return {k: sorted(v)[len(v) // 2] for k, v in ts.items()}


def _rel(got, ref):
    ref = ref.double()
    d = (got.double() - ref).norm()
    n = ref.norm()
    return float(d / n) if float(n) > 0 else float(d)


def worst(errs):
    """The largest error; NaN (an output left unwritten) wins."""
    errs = list(errs)
    return float("nan") if any(e != e for e in errs) else max(errs)


def _log(msg):
    print(msg, flush=True)


def derive(torch, rec, bufs):
    """Fill the recipe's derived inputs from the others (statistics of x; attention output and
    log-sum-exp) in fp32."""
    F = torch.nn.functional
    k = rec.key
    if k.startswith("layernorm_bwd") or k.startswith("batchnorm_bwd"):
        x = bufs["x"].float()
        dims = (1,) if k.startswith("layernorm") else (0, 2, 3)
        var, mean = torch.var_mean(x, dim=dims, keepdim=True, unbiased=False)
        bufs["mean"].copy_(mean.view(bufs["mean"].shape))
        bufs["inv_variance"].copy_(torch.rsqrt(var + 1e-5).view(bufs["inv_variance"].shape))
    elif k.startswith("rmsnorm_bwd"):
        x = bufs["x"].float()
        bufs["inv_rms"].copy_(torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5).view(bufs["inv_rms"].shape))
    elif k.startswith("sdpa_bwd"):
        q, kk, v = bufs["q"], bufs["k"], bufs["v"]
        sc = 1.0 / math.sqrt(q.shape[-1])
        bufs["o"].copy_(F.scaled_dot_product_attention(q, kk, v, is_causal=True, scale=sc))
        S = q.shape[2]
        mask = torch.ones(S, S, device=q.device, dtype=torch.bool).tril()
        for b in range(q.shape[0]):
            s = (q[b].float() @ kk[b].float().transpose(-1, -2)) * sc
            s.masked_fill_(~mask, float("-inf"))
            bufs["stats"][b].copy_(torch.logsumexp(s, dim=-1, keepdim=True))
            del s


def reference(torch, rec, bufs):
    """{output name: fp32 reference} (SDPA: batch 0 only, the rows' errors are over batch 0)."""
    F = torch.nn.functional
    k = rec.key
    f = {n: t.float() for n, t in bufs.items()}
    cv = dict(stride=1, padding=1)
    if k.startswith("conv3x3_bias_relu"):
        return {"y": F.relu(F.conv2d(f["x"], f["w"], f["b"].reshape(-1), **cv))}
    if k.startswith("conv3x3_dgrad"):
        dx = torch.ops.aten.convolution_backward(f["dy"], f["xa"], f["w"], None, [1, 1], [1, 1], [1, 1],
                                                 False, [0, 0], 1, [True, False, False])[0]
        return {"dx": dx * (f["xa"] > 0)}
    if k.startswith("conv3x3_wgrad"):
        wsh = rec.outputs["dw"].dims
        dw = torch.ops.aten.convolution_backward(f["dy"], f["x"], torch.empty(wsh, device=f["x"].device), None,
                                                 [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                 [False, True, False])[1]
        return {"dw": dw}
    if k.startswith("conv3x3_genstats"):
        y = F.conv2d(f["x"], f["w"], **cv)
        return {"y": y, "sum": y.sum((0, 2, 3)).view(1, -1, 1, 1),
                "sq_sum": (y * y).sum((0, 2, 3)).view(1, -1, 1, 1)}
    if k.startswith("matmul"):
        c = f["a"] @ f["b"]
        act = rec.params.get("act")
        if act:
            c = (F.relu if act == "relu" else F.gelu)(c + f["bias"])
        return {"c": c}
    if k.startswith("layernorm_fwd") or k.startswith("rmsnorm_fwd"):
        x = f["x"].reshape(f["x"].shape[0], -1)
        w = f["scale"].reshape(-1)
        if k.startswith("layernorm"):
            var, mean = torch.var_mean(x, dim=1, keepdim=True, unbiased=False)
            iv = torch.rsqrt(var + 1e-5)
            y = (x - mean) * iv * w + f["bias"].reshape(-1)
            return {"y": y.view(f["x"].shape), "mean": mean.view(-1, 1, 1, 1),
                    "inv_variance": iv.view(-1, 1, 1, 1)}
        iv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
        return {"y": (x * iv * w).view(f["x"].shape), "inv_rms": iv.view(-1, 1, 1, 1)}
    if k.startswith("layernorm_bwd") or k.startswith("rmsnorm_bwd"):
        M = f["x"].shape[0]
        x = f["x"].reshape(M, -1).clone().requires_grad_(True)
        w = f["scale"].reshape(-1).clone().requires_grad_(True)
        D = x.shape[1]
        if k.startswith("layernorm"):
            b = torch.zeros(D, device=x.device, requires_grad=True)
            y = F.layer_norm(x, (D,), w, b, 1e-5)
            dx, ds, db = torch.autograd.grad(y, (x, w, b), f["dy"].reshape(M, D))
            return {"dx": dx.view(f["x"].shape), "dscale": ds.view(1, D, 1, 1), "dbias": db.view(1, D, 1, 1)}
        y = x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5) * w
        dx, ds = torch.autograd.grad(y, (x, w), f["dy"].reshape(M, D))
        return {"dx": dx.view(f["x"].shape), "dscale": ds.view(1, D, 1, 1)}
    if k.startswith("sdpa_fwd"):
        q, kk, v = (f[n][:1] for n in ("q", "k", "v"))
        sc = 1.0 / math.sqrt(q.shape[-1])
        S = q.shape[2]
        s = (q @ kk.transpose(-1, -2)) * sc
        s.masked_fill_(~torch.ones(S, S, device=q.device, dtype=torch.bool).tril(), float("-inf"))
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        return {"o": torch.softmax(s, dim=-1) @ v, "stats": lse}
    if k.startswith("sdpa_bwd"):
        q, kk, v = (f[n][:1].clone().requires_grad_(True) for n in ("q", "k", "v"))
        sc = 1.0 / math.sqrt(q.shape[-1])
        o = F.scaled_dot_product_attention(q, kk, v, is_causal=True, scale=sc)
        dq, dk, dv = torch.autograd.grad(o, (q, kk, v), f["dO"][:1])
        return {"dq": dq, "dk": dk, "dv": dv}
    if k.startswith("batchnorm_train"):
        x = f["x"]
        var, mean = torch.var_mean(x, dim=(0, 2, 3), keepdim=True, unbiased=False)
        iv = torch.rsqrt(var + 1e-5)
        n = x.numel() // x.shape[1]
        y = (x - mean) * iv * f["scale"] + f["bias"]
        return {"y": y, "mean": mean, "inv_variance": iv,
                "next_running_mean": 0.9 * f["running_mean"] + 0.1 * mean,
                "next_running_var": 0.9 * f["running_var"] + 0.1 * var * n / (n - 1)}
    if k.startswith("batchnorm_bwd"):
        x = f["x"].clone().requires_grad_(True)
        C = x.shape[1]
        w = f["scale"].reshape(-1).clone().requires_grad_(True)
        b = torch.zeros(C, device=x.device, requires_grad=True)
        y = F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
        dx, ds, db = torch.autograd.grad(y, (x, w, b), f["dy"])
        return {"dx": dx, "dscale": ds.view(1, C, 1, 1), "dbias": db.view(1, C, 1, 1)}
    raise KeyError(k)


def torch_fn(torch, rec, bufs):
    """PyTorch's own call for the same work (for context: ``torch_ms``), or None."""
    F = torch.nn.functional
    k = rec.key
    B = bufs
    if k.startswith("conv3x3_bias_relu"):
        bb = B["b"].reshape(-1)
        return lambda: F.relu_(F.conv2d(B["x"], B["w"], bb, padding=1))
    if k.startswith("conv3x3_dgrad"):
        def f():
            dx = torch.ops.aten.convolution_backward(B["dy"], B["xa"], B["w"], None, [1, 1], [1, 1], [1, 1],
                                                     False, [0, 0], 1, [True, False, False])[0]
            return torch.ops.aten.threshold_backward(dx, B["xa"], 0)
        return f
    if k.startswith("conv3x3_wgrad"):
        w = torch.empty(rec.outputs["dw"].dims, device=B["x"].device, dtype=torch.float16)
        return lambda: torch.ops.aten.convolution_backward(B["dy"], B["x"], w, None, [1, 1], [1, 1], [1, 1],
                                                           False, [0, 0], 1, [False, True, False])
    if k.startswith("conv3x3_genstats"):
        return lambda: torch.batch_norm_stats(F.conv2d(B["x"], B["w"], padding=1), 1e-5)
    if k.startswith("matmul"):
        a, b = B["a"][0], B["b"][0]
        act = rec.params.get("act")
        if not act:
            return lambda: torch.matmul(a, b)
        bias = B["bias"].reshape(-1)
        if hasattr(torch, "_addmm_activation"):
            return lambda: torch._addmm_activation(bias, a, b, use_gelu=act == "gelu")
        g = F.relu if act == "relu" else F.gelu
        return lambda: g(torch.addmm(bias, a, b))
    if k.startswith("layernorm_fwd"):
        x, D = B["x"], B["x"].shape[1]
        x2 = x.reshape(-1, D)
        w, b = B["scale"].reshape(-1), B["bias"].reshape(-1)
        return lambda: torch.ops.aten.native_layer_norm(x2, [D], w, b, 1e-5)
    if k.startswith("layernorm_bwd"):
        D = B["x"].shape[1]
        x2, dy2 = B["x"].reshape(-1, D), B["dy"].reshape(-1, D)
        w = B["scale"].reshape(-1)
        b = torch.zeros_like(w)
        _, m, iv = torch.ops.aten.native_layer_norm(x2, [D], w, b, 1e-5)   # its own statistics' types
        return lambda: torch.ops.aten.native_layer_norm_backward(dy2, x2, [D], m, iv, w, b, [True, True, True])
    if k.startswith("rmsnorm_fwd"):
        D = B["x"].shape[1]
        x2, w = B["x"].reshape(-1, D), B["scale"].reshape(-1)
        return lambda: F.rms_norm(x2, (D,), w, 1e-5)
    if k.startswith("rmsnorm_bwd"):
        D = B["x"].shape[1]
        xh = B["x"].reshape(-1, D).detach().clone().requires_grad_(True)
        wh = B["scale"].reshape(-1).detach().clone().requires_grad_(True)
        yh = F.rms_norm(xh, (D,), wh, 1e-5)
        dy2 = B["dy"].reshape(-1, D)
        return lambda: torch.autograd.grad(yh, (xh, wh), dy2, retain_graph=True)
    if k.startswith("sdpa_fwd"):
        sc = 1.0 / math.sqrt(B["q"].shape[-1])
        return lambda: F.scaled_dot_product_attention(B["q"], B["k"], B["v"], is_causal=True, scale=sc)
    if k.startswith("sdpa_bwd"):
        sc = 1.0 / math.sqrt(B["q"].shape[-1])
        qq, kk, vv = (B[n].detach().requires_grad_(True) for n in ("q", "k", "v"))
        oo = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, scale=sc)
        return lambda: torch.autograd.grad(oo, (qq, kk, vv), B["dO"], retain_graph=True)
    if k.startswith("batchnorm_train"):
        rm, rv = B["running_mean"].reshape(-1).clone(), B["running_var"].reshape(-1).clone()
        w, b = B["scale"].reshape(-1), B["bias"].reshape(-1)
        return lambda: F.batch_norm(B["x"], rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
    if k.startswith("batchnorm_bwd"):
        w = B["scale"].reshape(-1)
        m, iv = B["mean"].reshape(-1), B["inv_variance"].reshape(-1)
        return lambda: torch.ops.aten.native_batch_norm_backward(B["dy"], B["x"], w, None, None, m, iv, True,
                                                                 1e-5, [True, True, True])
    return None


def _err_of(torch, rec, outs, ref):
    """{output: relative error} of one side's output buffers against the reference."""
    sdpa = rec.key.startswith("sdpa")
    return {n: _rel(outs[n][:1] if sdpa else outs[n], ref[n]) for n in ref}


def prepare(torch, rec, device="cuda"):
    """The row's input buffers (derived ones filled) and the fp32 reference outputs."""
    bufs = {n: alloc(torch, s, device=device) for n, s in rec.inputs.items()}
    derive(torch, rec, bufs)
    return bufs, reference(torch, rec, bufs)


def run_side(torch, rec, side, bufs, ref, row, device="cuda"):
    """Build the recipe on ``side``, run it once on ``bufs`` into fresh (NaN-filled) outputs,
    record build time, engine, plan notes and errors in ``row``; returns the timed callable."""
    p = side.name
    t0 = time.perf_counter()
    b = side.build(rec)
    row[f"{p}_build_s"] = time.perf_counter() - t0
    if b.engine:
        row[f"{p}_engine"] = b.engine
    if b.plan is not None:
        row[f"{p}_plan"] = b.plan
    outs = {n: alloc(torch, s, fill=False, device=device) for n, s in rec.outputs.items()}
    vp = {b.tensors[n]: bufs[n] for n in rec.inputs}
    vp.update({b.outputs[n]: outs[n] for n in rec.outputs})
    vp.update({t: torch.full((1, 1, 1, 1), v, dtype=torch.float32) for t, v in b.host.values()})
    ws = torch.empty(max(1, b.workspace_size), dtype=torch.uint8, device=device)
    for o in outs.values():
        o.fill_(float("nan"))
    side.execute(b, vp, ws)
    if device == "cuda":
        torch.cuda.synchronize()
    row[f"{p}_engine"] = side.engine_of(b)
    errs = _err_of(torch, rec, outs, ref)
    row[f"{p}_errs"] = errs
    row["err_vs_ref" if p == "ours" else f"{p}_err"] = worst(errs.values())

    def run():
        side.execute(b, vp, ws)
    run.keep = (b, outs, vp, ws)
    return run


def run_row(torch, rec, sides, log=_log):
    """One peer row: inputs, each side's graph and outputs, errors, interleaved times."""
    row = {"mirrors": rec.mirrors, "io": rec.io}
    if rec.note:
        row["note"] = rec.note
    bufs, ref = prepare(torch, rec)
    torch.cuda.synchronize()
    fns = {}
    for side in sides:
        try:
            fns[side.name] = run_side(torch, rec, side, bufs, ref, row)
        except Exception as e:  # noqa: BLE001 - recorded in the row
            p = side.name
            row[f"{p}_error"] = f"{type(e).__name__}: {e}"[:2000]
            log(f"   {rec.key}: {p}: {row[f'{p}_error'][:300]}")
    ours = next((sd for sd in sides if sd.name == "ours"), None)
    for label, knobs in rec.params.get("ours_knobs", {}).items() if ours is not None else ():
        # the same graph on our engine with other HIPDNN_CABI_HIP_* knobs (the plan is built -
        # and the knobs read - in run_side; both paths then time in the same interleaving)
        alt = copy.copy(ours)
        alt.name = f"ours_{label}"
        try:
            with hip_knobs(knobs):
                fns[alt.name] = run_side(torch, rec, alt, bufs, ref, row)
        except Exception as e:  # noqa: BLE001 - recorded in the row
            row[f"{alt.name}_error"] = f"{type(e).__name__}: {e}"[:2000]
    try:
        tf = torch_fn(torch, rec, bufs)
        if tf is not None:
            tf()
            torch.cuda.synchronize()
            fns["torch"] = tf
    except Exception as e:  # noqa: BLE001
        row["torch_error"] = f"{type(e).__name__}: {e}"[:500]
    if fns:
        try:
            ms = interleaved_ms(torch, fns)
            for p, t in ms.items():
                row[f"{p}_ms"] = t
                kind, n = rec.work
                if kind == "flop":
                    row[f"{p}_tflops"] = n / t / 1e9
                else:
                    row[f"{p}_GBps"] = n / t / 1e6
        except Exception as e:  # noqa: BLE001
            row["timing_error"] = f"{type(e).__name__}: {e}"[:500]
    if "ours_ms" in row and "cudnn_ms" in row:
        row["ratio_vs_cudnn"] = row["cudnn_ms"] / row["ours_ms"]
    if "ours_ms" in row and "torch_ms" in row:
        row["ratio_vs_torch"] = row["torch_ms"] / row["ours_ms"]
    for label in rec.params.get("ours_knobs", {}):
        if f"ours_{label}_ms" in row and "cudnn_ms" in row:
            row[f"ratio_vs_cudnn_{label}"] = row["cudnn_ms"] / row[f"ours_{label}_ms"]
    row["work"] = {"kind": rec.work[0], "n": rec.work[1]}
    del fns, bufs, ref
    return row


def fmt(key, row):
    def f(k, spec=".3f"):
        v = row.get(k)
        return format(v, spec) if isinstance(v, float) else "-"
    return (f"cudnnpeer {key}: ours {f('ours_ms')} ms cuDNN {f('cudnn_ms')} ms torch {f('torch_ms')} ms"
            f" -> {f('ratio_vs_cudnn', '.2f')}x vs cuDNN, err {f('err_vs_ref', '.1e')}"
            f" (cuDNN {f('cudnn_err', '.1e')})")


def _dump_partial(res):
    """Rewrite gpu_bench's ``--out`` file after each row, so that a run cut short (a timeout)
    keeps the rows done (gpu_bench itself writes after each group)."""
    argv = sys.argv
    path = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--out"), None) or \
        next((a[len("--out="):] for a in argv if a.startswith("--out=")), None)
    if not path or not os.path.basename(argv[0]).startswith(("gpu_bench", "cudnn_peer")):
        return
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    except (OSError, TypeError, ValueError):
        pass


def bench_cudnn_peer(torch, E, res, sizes=None, only=None, log=_log):
    """The ``cudnnpeer`` group: every recipe through both frontends (``E``, the plugin object the
    other groups time, is not used: our side goes through the public frontend)."""
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark)
    try:
        torch.backends.cuda.matmul.allow_tf32 = False      # fp32 references without TF32
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        return _peer_group(torch, res, sizes, only, log)
    finally:
        (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
         torch.backends.cudnn.benchmark) = flags


def _peer_group(torch, res, sizes, only, log):
    stream = torch.cuda.current_stream().cuda_stream
    group = {"cases": {}, "ratio": "cuDNN ms / ours ms (> 1: ours faster)",
             "err": "relative Frobenius error vs an fp32 PyTorch reference (max over outputs; "
                    "SDPA over batch 0)", "reps": REPS, "statistic": "median, interleaved"}
    sides = []
    try:
        sides.append(OursSide(stream=stream, engine=HIP_ENGINE))
    except Exception as e:  # noqa: BLE001
        group["ours_error"] = f"{type(e).__name__}: {e}"
    try:
        group["torch_cudnn_version"] = torch.backends.cudnn.version()  # loads libcudnn.so.9 first
        c = CudnnSide(stream=stream)
        group["cudnn_version"] = str(c.cudnn.backend_version())
        group["cudnn_frontend_version"] = getattr(c.cudnn, "__version__", "")
        sides.append(c)
    except Exception as e:  # noqa: BLE001 - no wheel / no libcudnn: rows keep ours and torch
        group["cudnn_error"] = f"{type(e).__name__}: {e}"
        log(f"cudnnpeer: cuDNN frontend unavailable: {group['cudnn_error']}")
    res["cudnn_peer"] = group
    if only is None and os.environ.get("CUDNN_PEER_ROWS"):
        only = os.environ["CUDNN_PEER_ROWS"].split(",")
    t0 = time.perf_counter()
    for rec in recipes(sizes):
        if only and not any(o in rec.key for o in only):
            continue
        try:
            row = run_row(torch, rec, sides, log=log)
        except Exception as e:  # noqa: BLE001
            row = {"error": f"{type(e).__name__}: {e}"[:2000]}
        group["cases"][rec.key] = row
        log(fmt(rec.key, row))
        torch.cuda.empty_cache()
        _dump_partial(res)
    group["wall_s"] = time.perf_counter() - t0
    return group


STEPS = [("cudnnpeer", bench_cudnn_peer)]


if __name__ == "__main__":
    # python3 bench/cudnn_peer.py [--out FILE]: the peer rows only (CUDNN_PEER_ROWS=conv,sdpa ...
    # keeps the rows whose key contains one of the words)
    import gpu_bench
    if "--only" not in sys.argv:
        sys.argv += ["--only", "cudnnpeer"]
    if "--out" not in sys.argv:
        sys.argv += ["--out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                           "gpu_cudnn_peer.json")]
    gpu_bench.main()
