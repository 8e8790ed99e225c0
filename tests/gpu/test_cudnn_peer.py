"""bench/cudnn_peer.py: the cuDNN graph-API peer rows.

CPU side (no torch, no cudnn): the module imports; the recipes' specs are consistent (strides
are torch's channels-last strides, derived inputs are inputs, every row mirrors a gpu_bench
group); every recipe builds through this project's frontend (plan on the CPU reference engine)
and the HIP engine's program builder accepts each graph at the benchmark's sizes; every recipe builds
through a stand-in of cudnn-frontend 1.23's pygraph that checks each call against the pybind11
signatures (python/pygraph/*.cpp: parameter names, required parameters, tensor-valued
parameters such as epsilon, the generate_stats / is_inference rule).

GPU side (``-m gpu``, needs torch and the nvidia-cudnn-frontend wheel): the group at small
sizes; every row's error against the fp32 reference, ours and cuDNN's.
"""
from __future__ import annotations

import importlib
import math
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

SMALL = {"conv": dict(N=2, C=16, K=32, H=8), "mm": dict(M=128, N=128, K=64), "norm": dict(M=64, D=256),
         "sdpa": dict(B=1, H=2, S=128, D=64), "bn": dict(N=2, C=16, H=6)}


def peer():
    return importlib.import_module("cudnn_peer")


def test_imports_without_torch_or_cudnn():
    had = {m: m in sys.modules for m in ("torch", "cudnn")}
    cp = peer()
    rs = cp.recipes()
    assert len(rs) == 15 and len({r.key for r in rs}) == 15
    for m, was in had.items():
        assert was or m not in sys.modules, f"importing cudnn_peer imported {m}"


def test_strides_are_torch_channels_last():
    cp = peer()
    assert cp.strides_of((2, 3, 4, 5), "nhwc") == [60, 1, 15, 3]
    assert cp.strides_of((1, 64, 1, 1), "nhwc") == [64, 1, 64, 64]       # torch: (64, 1, 64, 64)
    assert cp.strides_of((2, 3, 4, 5, 6), "nhwc") == [360, 1, 90, 18, 3]  # channels_last_3d
    assert cp.strides_of((8, 16, 4), "row") == [64, 4, 1]


def test_recipes_are_consistent():
    cp = peer()
    src = "".join(open(os.path.join(ROOT, "bench", f)).read() for f in ("gpu_bench.py", "gpu_bench_ext.py"))
    for r in cp.recipes():
        assert set(r.derived) <= set(r.inputs), r.key
        assert not set(r.inputs) & set(r.outputs), r.key
        assert f'"{r.mirrors}"' in src, f"{r.key}: group {r.mirrors} not in gpu_bench"
        for s in list(r.inputs.values()) + list(r.outputs.values()):
            assert s.dtype in cp.ELEM and len(s.strides) == len(s.dims)
        assert r.work[0] in ("flop", "bytes") and r.work[1] > 0
    sizes = {r.key: r for r in cp.recipes()}
    # the benchmark's sizes
    assert sizes["conv3x3_bias_relu_fp16_nhwc"].inputs["x"].dims == (32, 64, 56, 56)
    assert "matmul_bf16_8192x8192x8192" in sizes
    assert "layernorm_fwd_bf16_16384x4096" in sizes
    assert sizes["sdpa_fwd_bf16_b8h16s4096d128_causal"].inputs["q"].dims == (8, 16, 4096, 128)
    assert sizes["batchnorm_train_fwd_fp16_nhwc_32x256x56x56"].inputs["x"].layout == "nhwc"


def _ours():
    pytest.importorskip("flatbuffers")
    from hipdnn_cabi import capi
    try:
        capi.load()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"backend library not built: {e}")
    return peer().OursSide()


def test_every_recipe_builds_through_our_frontend():
    side = _ours()
    for r in peer().recipes(SMALL):
        b = side.build(r)
        assert set(b.outputs) == set(r.outputs)
        for n, s in r.outputs.items():
            t = b.outputs[n]
            assert list(t.get_dim()) == list(s.dims) and list(t.get_stride()) == s.strides, (r.key, n)
        assert not b.host               # our scalars are compile-time constants
        b.g.close()


def test_hip_engine_accepts_every_recipe_at_the_benchmark_sizes():
    """The HIP engine's program builder (sm_90, no GPU needed) takes every graph: one fused
    kernel for conv + bias + relu and matmul + bias + activation."""
    side = _ours()
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    for r in peer().recipes():
        g = side.graph(r)[0]
        p = build_program(parse_graph(g.serialize()), use_mma=True, sms=132, arch="sm_90")
        launches = sum(1 for s in p.steps if s[0] == "launch")
        if "bias" in r.key:
            assert launches == 1 and any("2 pointwise node(s) fused" in n for n in p.notes), (r.key, p.notes)
        g.close()


def test_hip_engine_sources_for_every_recipe_compile_sm90a():
    """Every kernel the HIP engine generates for the peer rows (benchmark sizes) compiles for sm_90a
    with NVRTC and spills nothing (skipped where the NVRTC wheel is not importable)."""
    side = _ours()
    from engine_plugins.hip_kernels import codegen
    from engine_plugins.hip_kernels.program import build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    try:
        from hipdnn_cabi.device import compiler
        c = compiler("cuda")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")
    hdr = codegen.headers()
    seen = set()
    for r in peer().recipes():
        g = side.graph(r)[0]
        p = build_program(parse_graph(g.serialize()), use_mma=True, sms=132, arch="sm_90")
        for st in p.steps:
            if st[0] == "launch" and st[1] not in seen:
                seen.add(st[1])
                assert c.compile(st[1], f"{r.key}_{st[2]}.hip", ("--ptxas-options=-v",), "sm_90a", hdr)
                assert " 0 bytes spill stores" in c.last_log, (r.key, st[2], c.last_log)
        g.close()
    assert len(seen) >= 20


def test_references_match_the_cpu_reference_engine():
    """With torch (CPU tensors): each recipe's inputs, derived inputs and fp32 reference, and our
    frontend's graph run on the CPU reference engine (host buffers) — the oracle agrees with the
    references the device rows are measured against (SDPA statistics convention, running
    statistics, dgrad + dReLU mask, the statistics as reductions, ...)."""
    torch = pytest.importorskip("torch")
    side = _ours()
    cp = peer()
    torch.manual_seed(0)
    small = dict(SMALL, mm=dict(M=64, N=64, K=64), norm=dict(M=16, D=256), sdpa=dict(B=2, H=2, S=32, D=16))
    for r in cp.recipes(small):
        row = {}
        bufs, ref = cp.prepare(torch, r, device="cpu")
        cp.run_side(torch, r, side, bufs, ref, row, device="cpu")
        assert row["ours_engine"] == "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
        assert row["err_vs_ref"] < 1e-2, (r.key, row["ours_errs"])
    # the cuDNN side's variant pack from the same buffers (the stand-in checks it)
    c = cp.CudnnSide(module=fake_cudnn(), stream=0)
    FakePygraph.executed = 0
    for r in cp.recipes(small):
        bufs, ref = cp.prepare(torch, r, device="cpu")
        cp.run_side(torch, r, c, bufs, ref, {}, device="cpu")
    assert FakePygraph.executed == len(cp.recipes())


# ------------------------------------------------------------------ cudnn-frontend 1.23 stand-in
T_ = object()          # a parameter that takes a graph tensor
REQ = object()         # a required parameter
_CONV = dict(padding=None, stride=None, dilation=None, convolution_mode=None, compute_data_type=None, name=None)
_CONV_PP = dict(pre_padding=None, post_padding=None, stride=None, dilation=None, convolution_mode=None,
                compute_data_type=None, name=None)
_SDPA_OPT = ("bias block_mask use_alibi_mask use_padding_mask seq_len_q seq_len_kv use_causal_mask "
             "use_causal_mask_bottom_right sliding_window_length diagonal_alignment diagonal_band_left_bound "
             "diagonal_band_right_bound dropout rng_dump paged_attention_k_table paged_attention_v_table "
             "paged_attention_max_seq_len_kv compute_data_type name score_mod implementation score_max "
             "score_sum_exp sink_token unfuse_fma").split()
_SDPA_BWD_OPT = ("bias dBias use_alibi_mask use_padding_mask seq_len_q seq_len_kv max_total_seq_len_q "
                 "max_total_seq_len_kv use_causal_mask use_causal_mask_bottom_right sliding_window_length "
                 "diagonal_alignment diagonal_band_left_bound diagonal_band_right_bound dropout rng_dump "
                 "use_deterministic_algorithm compute_data_type name score_mod score_mod_bprop sink_token "
                 "dSink_token").split()
# method -> (ordered parameters {name: T_ | REQ | None (optional)}, number of returned tensors);
# from cudnn-frontend 1.23.0 python/pygraph/{pygraph,norm,pointwise,sdpa}.cpp
SIGS = {
    "conv_fprop": [(dict(image=T_, weight=T_, **_CONV), 1), (dict(image=T_, weight=T_, **_CONV_PP), 1)],
    "conv_dgrad": [(dict(loss=T_, filter=T_, **_CONV), 1), (dict(loss=T_, filter=T_, **_CONV_PP), 1)],
    "conv_wgrad": [(dict(image=T_, loss=T_, **_CONV), 1), (dict(image=T_, loss=T_, **_CONV_PP), 1)],
    "genstats": [(dict(input=T_, compute_data_type=None, name=None), 2)],
    "matmul": [(dict(A=T_, B=T_, compute_data_type=None, padding=None, name=None), 1)],
    "reduction": [(dict(input=T_, mode=REQ, compute_data_type=None, name=None), 1)],
    "bias": [(dict(input=T_, bias=T_, compute_data_type=None, name=None), 1)],
    "add": [(dict(a=T_, b=T_, compute_data_type=None, name=None), 1)],
    "mul": [(dict(a=T_, b=T_, compute_data_type=None, name=None), 1)],
    "relu": [(dict(input=T_, negative_slope=None, lower_clip=None, upper_clip=None, compute_data_type=None,
                   name=None), 1)],
    "gelu": [(dict(input=T_, compute_data_type=None, name=None), 1)],
    "relu_backward": [(dict(loss=T_, input=T_, negative_slope=None, lower_clip=None, upper_clip=None,
                            compute_data_type=None, name=None), 1)],
    "batchnorm": [(dict(input=T_, scale=T_, bias=T_, in_running_mean=T_, in_running_var=T_, epsilon=T_,
                        momentum=T_, peer_stats=None, compute_data_type=None, name=None), 5)],
    "layernorm": [(dict(norm_forward_phase=REQ, input=T_, scale=T_, bias=T_, epsilon=T_, compute_data_type=None,
                        name=None), 3)],
    "batchnorm_backward": [(dict(grad=T_, input=T_, scale=T_, mean=T_, inv_variance=T_, peer_stats=None,
                                 compute_data_type=None, name=None), 3)],
    "layernorm_backward": [(dict(grad=T_, input=T_, scale=T_, mean=T_, inv_variance=T_, compute_data_type=None,
                                 name=None), 3)],
    "rmsnorm": [(dict(norm_forward_phase=REQ, input=T_, scale=T_, bias=None, epsilon=T_, compute_data_type=None,
                      name=None), 2)],
    "rmsnorm_backward": [(dict(grad=T_, input=T_, scale=T_, inv_variance=T_, has_dbias=REQ, compute_data_type=None,
                               name=None), 3)],
    "sdpa": [(dict(q=T_, k=T_, v=T_, is_inference=None, attn_scale=None, **{k: None for k in _SDPA_OPT},
                   generate_stats=None), 2)],
    "sdpa_backward": [(dict(q=T_, k=T_, v=T_, o=T_, dO=T_, stats=T_, attn_scale=None,
                            **{k: None for k in _SDPA_BWD_OPT}), 3)],
}


class FakeTensor:
    def __init__(self, **kw):
        self.a = dict(kw)

    def _set(k):
        def f(self, v=True):
            self.a[k] = v
            return self
        return f
    set_output, set_dim, set_stride = _set("output"), _set("dim"), _set("stride")
    set_data_type, set_name = _set("data_type"), _set("name")


class FakePygraph:
    calls = []
    executed = 0

    def __init__(self, name="test_graph", io_data_type=None, intermediate_data_type=None,
                 compute_data_type=None, handle=None, sm_count=None, sm_version=None, kernel_cache=None,
                 device_property=None, is_dynamic_shape_enabled=False, is_override_shape_enabled=False):
        assert handle is not None
        self.steps = []

    def tensor(self, dim, stride, data_type=None, is_virtual=False, is_pass_by_value=False, ragged_offset=None,
               reordering_type=None, name="", uid=-1):
        assert len(dim) == len(stride) and data_type is not None
        t = FakeTensor(dim=list(dim), stride=list(stride), data_type=data_type, name=name,
                       by_value=is_pass_by_value)
        self.steps.append(("tensor", {}, [t]))
        return t

    def execute(self, vp, workspace, handle=None):
        """Every graph input and every output has a buffer; by-value scalars a host one."""
        assert handle == 1234
        need = [o for op, _, outs in self.steps for o in outs if op == "tensor" or o.a.get("output")]
        missing = [t.a.get("name") for t in need if t not in vp]
        assert not missing, f"variant pack lacks {missing}"
        for t, buf in vp.items():
            if t.a.get("by_value"):
                assert buf.device.type == "cpu" and buf.numel() == 1
            else:
                assert list(buf.shape) == t.a["dim"] and list(buf.stride()) == t.a["stride"], t.a.get("name")
        FakePygraph.executed += 1

    def __getattr__(self, op):
        if op not in SIGS:
            raise AttributeError(f"cudnn-frontend pygraph has no {op!r} (or the stand-in lacks it)")

        def call(*args, **kw):
            assert not args, f"{op}: the peer passes keywords only"
            errors = []
            for params, nret in SIGS[op]:
                unknown = set(kw) - set(params)
                missing = [p for p, v in params.items() if v in (T_, REQ) and p not in kw]
                bad = [p for p, v in params.items() if v is T_ and p in kw and not isinstance(kw[p], FakeTensor)]
                if not unknown and not missing and not bad:
                    break
                errors.append(f"unknown {sorted(unknown)} missing {missing} not tensors {bad}")
            else:
                raise TypeError(f"{op}: incompatible call: {'; '.join(errors)}")
            if op in ("sdpa",):
                assert (kw.get("generate_stats") is None) != (kw.get("is_inference") is None), \
                    "exactly one of generate_stats / is_inference"
                assert kw.get("attn_scale") is None or isinstance(kw["attn_scale"], (float, FakeTensor))
            if op == "conv_dgrad":
                pass                      # dims checked at validate (below)
            tnames = {o.a.get("name") for o_, _, outs in self.steps if o_ == "tensor" for o in outs}
            assert kw.get("name") not in tnames, f"{op}: node name {kw.get('name')!r} is a tensor's name"
            FakePygraph.calls.append(op)
            outs = [FakeTensor(op=op, inputs=kw) for _ in range(nret)]
            self.steps.append((op, kw, outs))
            return outs[0] if nret == 1 else outs
        return call

    def validate(self):
        for op, kw, outs in self.steps:
            if op == "conv_dgrad":     # cudnn-frontend: "For dgrad node, output dimension inferencing is not possible."
                assert "dim" in outs[0].a, "conv_dgrad's output dims must be set"

    def build_operation_graph(self):
        pass

    def create_execution_plans(self, modes):
        assert isinstance(modes, list) and modes

    def check_support(self):
        pass

    def build_plans(self, policy=None):
        pass

    def get_workspace_size(self):
        return 0


def fake_cudnn():
    import types
    m = types.ModuleType("fake_cudnn")
    m.data_type = types.SimpleNamespace(HALF="HALF", BFLOAT16="BFLOAT16", FLOAT="FLOAT")
    m.norm_forward_phase = types.SimpleNamespace(TRAINING="TRAINING", INFERENCE="INFERENCE")
    m.heur_mode = types.SimpleNamespace(A="A", FALLBACK="FALLBACK")
    m.build_plan_policy = types.SimpleNamespace(HEURISTICS_CHOICE="HEURISTICS_CHOICE", ALL="ALL")
    m.create_handle = lambda: 1234
    m.set_stream = lambda handle, stream: None
    m.pygraph = FakePygraph
    m.backend_version_string = lambda: "9.x (stand-in)"
    return m


def test_every_recipe_builds_through_cudnn_pygraph_signatures():
    cp = peer()
    side = cp.CudnnSide(module=fake_cudnn(), stream=0)
    FakePygraph.calls.clear()
    for r in cp.recipes():
        b = side.build(r)
        for n, s in r.outputs.items():
            a = b.outputs[n].a
            assert a["output"] is True and a["dim"] == list(s.dims) and a["stride"] == s.strides
            assert a["data_type"] == s.dtype
        for n, s in r.inputs.items():
            assert b.tensors[n].a["dim"] == list(s.dims) and b.tensors[n].a["data_type"] == s.dtype
        if r.key.startswith(("layernorm_fwd", "rmsnorm_fwd", "batchnorm_train")):
            assert b.host and all(t.a["by_value"] for t, _ in b.host.values())
            assert b.host["epsilon"][1] == pytest.approx(1e-5)
    for op in ("conv_fprop", "conv_dgrad", "conv_wgrad", "genstats", "matmul", "bias", "relu", "gelu",
               "relu_backward", "layernorm", "layernorm_backward", "rmsnorm", "rmsnorm_backward", "sdpa",
               "sdpa_backward", "batchnorm", "batchnorm_backward"):
        assert op in FakePygraph.calls, op


def test_stand_in_rejects_a_float_epsilon():
    """The stand-in catches what pybind11 would (epsilon as a number, an unknown keyword)."""
    g = FakePygraph(handle=1)
    x = g.tensor(dim=[4, 8, 1, 1], stride=[8, 1, 1, 1], data_type="BFLOAT16")
    with pytest.raises(TypeError):
        g.layernorm(norm_forward_phase="TRAINING", input=x, scale=x, bias=x, epsilon=1e-5)
    with pytest.raises(TypeError):
        g.matmul(A=x, B=x, alpha=2.0)


# ------------------------------------------------------------------ on the device
@pytest.mark.gpu
def test_peer_rows_small_sizes():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    cp = peer()
    res = {}
    g = cp.bench_cudnn_peer(torch, None, res, sizes=SMALL)
    assert "ours_error" not in g, g.get("ours_error")
    bad = []
    for key, row in g["cases"].items():
        tol = 3e-2
        if "ours_error" in row or not row.get("err_vs_ref", 1) < tol:
            bad.append((key, "ours", row.get("ours_error"), row.get("ours_errs")))
        if "cudnn_error" not in g and "cudnn_error" not in row and not row.get("cudnn_err", 1) < tol:
            bad.append((key, "cudnn", row.get("cudnn_errs")))
        assert math.isfinite(row.get("ours_ms", float("nan"))), (key, row)
    assert not bad, bad
